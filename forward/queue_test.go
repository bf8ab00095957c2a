package forward

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func openTestQueue(t *testing.T, dir string, recovered uint64) (*queue, cursor) {
	t.Helper()
	q, c, err := openQueue(dir, 1<<20, recovered, quiet(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return q, c
}

// put prepares and commits a frame whose payload names its seq.
func put(t *testing.T, q *queue, seq uint64, samples int) {
	t.Helper()
	if err := q.prepare(seq, samples, 1, fmt.Appendf(nil, "payload %d", seq)); err != nil {
		t.Fatal(err)
	}
	if pub, lost := q.commit(seq, true); pub != int64(samples) || lost != 0 {
		t.Fatalf("commit %d: published %d lost %d", seq, pub, lost)
	}
}

// drain reads every committed frame and returns their seqs.
func drain(t *testing.T, q *queue) []uint64 {
	t.Helper()
	var rb readBuf
	var seqs []uint64
	for {
		fr, ok, err := q.next(&rb)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return seqs
		}
		if want := fmt.Sprintf("payload %d", fr.seq); string(fr.payload) != want {
			t.Fatalf("frame %d payload %q", fr.seq, fr.payload)
		}
		seqs = append(seqs, fr.seq)
	}
}

func equalSeqs(t *testing.T, got []uint64, want ...uint64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("frames %v, want %v", got, want)
	}
}

// A frame is visible only once committed as logged; one committed as not
// logged is removed and its seq can be used again.
func TestQueueCommit(t *testing.T) {
	q, _ := openTestQueue(t, t.TempDir(), 0)
	defer q.close()
	put(t, q, 1, 3)
	if err := q.prepare(2, 5, 1, []byte("payload 2")); err != nil {
		t.Fatal(err)
	}
	equalSeqs(t, drain(t, q), 1)
	q.commit(2, false)
	put(t, q, 2, 4)
	put(t, q, 3, 1)
	equalSeqs(t, drain(t, q), 2, 3)
	if q.backlog != 0 {
		t.Fatalf("backlog %d after reading all", q.backlog)
	}
}

// After a crash, a frame prepared but never logged (seq above what the
// database recovered) is cut off; one logged but not yet committed (the
// crash came between the WAL write and FeedCommit) is kept; a torn tail is
// cut; the cursor says where delivery resumes.
func TestQueueReopen(t *testing.T) {
	dir := t.TempDir()
	q, _ := openTestQueue(t, dir, 0)
	for s := uint64(1); s <= 4; s++ {
		put(t, q, s, 2)
	}
	if err := q.prepare(5, 2, 1, []byte("payload 5")); err != nil { // logged, then the crash
		t.Fatal(err)
	}
	if err := q.saveCursor(cursor{seq: 2, done: 1}); err != nil {
		t.Fatal(err)
	}
	// No close: a crash. The engine recovered seq 5.
	q2, c := openTestQueue(t, dir, 5)
	if c != (cursor{seq: 2, done: 1}) {
		t.Fatalf("cursor %+v", c)
	}
	equalSeqs(t, drain(t, q2), 1, 2, 3, 4, 5)
	if err := q2.prepare(6, 1, 1, []byte("payload 6")); err != nil { // never logged
		t.Fatal(err)
	}
	q3, _ := openTestQueue(t, dir, 5)
	equalSeqs(t, drain(t, q3), 1, 2, 3, 4, 5)

	// A torn frame at the end of the last file is cut off.
	put(t, q3, 6, 1)
	q3.close()
	last := lastQueueFile(t, dir)
	appendBytes(t, last, appendFrame(nil, 7, 0, 1, 1, 0, []byte("payload 7"))[:20])
	q4, _ := openTestQueue(t, dir, 7)
	equalSeqs(t, drain(t, q4), 1, 2, 3, 4, 5, 6)
	q4.close()
	q.close()
	q2.close()
}

// Damage in a file that is not the last loses the damaged frame only,
// counted; a damaged header sets its file aside (counted too) and never
// stops the queue from opening.
func TestQueueDamageMidQueue(t *testing.T) {
	dir := t.TempDir()
	q, _, err := openQueue(dir, 1, 10, quiet(), time.Now) // one frame per file
	if err != nil {
		t.Fatal(err)
	}
	for s := uint64(1); s <= 3; s++ {
		put(t, q, s, 1)
	}
	q.close()
	// File 3 holds frame 2: flip a payload byte.
	path := filepath.Join(dir, queueFileName(3))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	q2, _, err := openQueue(dir, 1, 10, quiet(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	equalSeqs(t, drain(t, q2), 1, 3)
	if q2.damaged != 1 {
		t.Errorf("damaged %d, want 1", q2.damaged)
	}
	q2.close()

	// File 2 holds frame 1: damage its header.
	hp := filepath.Join(dir, queueFileName(2))
	h, _ := os.ReadFile(hp)
	h[0] = 'X'
	os.WriteFile(hp, h, 0o644)
	q3, _, err := openQueue(dir, 1, 10, quiet(), time.Now)
	if err != nil {
		t.Fatalf("damaged header: %v", err)
	}
	defer q3.close()
	equalSeqs(t, drain(t, q3), 3)
	if q3.damaged != 1 {
		t.Errorf("damaged %d, want 1 (frame 1 set aside; frame 2's damage was counted by the open before)", q3.damaged)
	}
	if _, err := os.Stat(hp + damagedSuffix); err != nil {
		t.Errorf("damaged file not set aside: %v", err)
	}
}

func TestCursorRoundTrip(t *testing.T) {
	r := cursorRecord{seq: 1<<63 + 5, done: 77, settled: 9, queued: 1<<40 + 3, queuedSeq: 8, clean: true, counts: true}
	got, err := unmarshalCursor(r.marshal(nil))
	if err != nil || got != r {
		t.Fatalf("%+v %v", got, err)
	}
	c := cursor{seq: 1<<63 + 5, done: 77}
	if got, err := unmarshalCursor(c.marshalV1()); err != nil || got != (cursorRecord{seq: c.seq, done: c.done}) {
		t.Fatalf("version 1: %+v %v", got, err)
	}
	for _, b := range [][]byte{r.marshal(nil), c.marshalV1()} {
		for i := range b {
			bad := bytes.Clone(b)
			bad[i] ^= 1
			if _, err := unmarshalCursor(bad); !errors.Is(err, errQueueCorrupt) {
				t.Errorf("flip byte %d: %v", i, err)
			}
		}
		if _, err := unmarshalCursor(b[:10]); !errors.Is(err, errQueueCorrupt) {
			t.Errorf("short cursor: %v", err)
		}
	}
	// A damaged cursor file (a power loss mid-write) means delivering the
	// whole queue again: duplicates, never a loss.
	dir := t.TempDir()
	q, _ := openTestQueue(t, dir, 10)
	put(t, q, 1, 1)
	put(t, q, 2, 1)
	q.saveCursor(cursor{seq: 2, done: 1})
	q.close()
	os.WriteFile(filepath.Join(dir, cursorName), []byte("junk"), 0o644)
	q, c2 := openTestQueue(t, dir, 10)
	defer q.close()
	if c2 != (cursor{}) {
		t.Fatalf("cursor %+v from junk", c2)
	}
	equalSeqs(t, drain(t, q), 1, 2)
}

func lastQueueFile(t *testing.T, dir string) string {
	t.Helper()
	var last string
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		if _, ok := parseQueueFileName(n.Name()); ok {
			last = filepath.Join(dir, n.Name())
		}
	}
	return last
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// FuzzQueueFile opens a queue whose only file holds arbitrary bytes after
// a valid header: opening never panics and reads back only whole frames.
func FuzzQueueFile(f *testing.F) {
	f.Add(appendFrame(nil, 1, 5, 2, 1, 0, []byte("payload 1")))
	f.Add(append(appendFrame(nil, 1, 5, 2, 1, 0, []byte("payload 1")), appendFrame(nil, 2, 6, 1, 1, 2, []byte("x"))[:30]...))
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0})
	f.Add([]byte{})
	// Preallocated files: zeros after the last frame, after a torn frame,
	// and nothing but zeros.
	f.Add(append(appendFrame(nil, 1, 5, 2, 1, 0, []byte("payload 1")), make([]byte, 100)...))
	f.Add(append(appendFrame(nil, 1, 5, 2, 1, 0, []byte("payload 1"))[:33], make([]byte, 100)...))
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, body []byte) {
		dir := t.TempDir()
		data := append(appendQueueHeader(nil, 1, 0), body...)
		if err := os.WriteFile(filepath.Join(dir, queueFileName(1)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		q, _, err := openQueue(dir, 1<<20, 1<<62, quiet(), time.Now)
		if err != nil {
			t.Fatal(err) // the last file's damage is a torn tail, never an error
		}
		defer q.close()
		var rb readBuf
		var prev uint64
		for {
			fr, ok, err := q.next(&rb)
			if err != nil || !ok {
				break
			}
			if fr.seq <= prev {
				t.Fatalf("frame %d after %d", fr.seq, prev)
			}
			prev = fr.seq
		}
	})
}

func FuzzCursor(f *testing.F) {
	f.Add(cursor{seq: 3, done: 4}.marshalV1())
	f.Add(cursorRecord{seq: 3, done: 4, settled: 5, queued: 7, queuedSeq: 2, clean: true}.marshal(nil))
	f.Add([]byte("SFWC"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := unmarshalCursor(b)
		if err == nil && c.counts && !bytes.Equal(c.marshal(nil), b) {
			t.Fatalf("cursor %x does not round-trip", b)
		}
		if err == nil && !c.counts && !bytes.Equal(c.ack().marshalV1(), b) {
			t.Fatalf("cursor %x does not round-trip", b)
		}
	})
}

// The reader reads ahead: frames small and large, straddling its buffer's
// end, frames committed after a read, and frames larger than the buffer all
// come back whole, in order.
func TestQueueReadAhead(t *testing.T) {
	q, _, err := openQueue(t.TempDir(), 64<<20, 1<<62, quiet(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer q.close()
	payload := func(seq uint64) []byte {
		n := []int{10, 300 << 10, 7, readAhead + 12345, 1, 200 << 10}[seq%6]
		b := fmt.Appendf(nil, "%d:", seq)
		return append(b, bytes.Repeat([]byte{byte(seq)}, n)...)[:n]
	}
	var rb readBuf
	seq := uint64(0)
	read := func(want uint64) {
		t.Helper()
		for want > 0 {
			fr, ok, err := q.next(&rb)
			if err != nil || !ok {
				t.Fatalf("next: ok %v err %v, %d frames still to read", ok, err, want)
			}
			if p := payload(fr.seq); !bytes.Equal(fr.payload, p) {
				t.Fatalf("frame %d: payload of %d bytes differs from the %d written", fr.seq, len(fr.payload), len(p))
			}
			want--
		}
		if _, ok, _ := q.next(&rb); ok {
			t.Fatal("a frame past those committed")
		}
	}
	for round := range 4 {
		n := uint64(5 + round*7)
		for range n {
			seq++
			if err := q.prepare(seq, 1, 1, payload(seq)); err != nil {
				t.Fatal(err)
			}
			q.commit(seq, true)
		}
		read(n)
	}
	// Many small frames: far fewer reads than frames.
	for range 2000 {
		seq++
		q.prepare(seq, 1, 1, strconv.AppendUint(nil, seq, 10))
		q.commit(seq, true)
	}
	refills := 0
	for range 2000 {
		before := rb.off
		fr, ok, err := q.next(&rb)
		if err != nil || !ok || string(fr.payload) != strconv.FormatUint(fr.seq, 10) {
			t.Fatalf("small frame: %v %v %q", ok, err, fr.payload)
		}
		if rb.off != before {
			refills++
		}
	}
	if refills > 1 {
		t.Errorf("%d reads for 2000 small frames", refills)
	}
}

// BenchmarkQueueAppend measures what queueing costs the writer: prepare
// and commit of frames the size of a Write of 100 and of 10,000 baseline
// points (12 bytes a point), into files mapped (Linux) or appended to with
// write(2), including the file rolls of 64 MiB segments. Between frames
// the writer spins for as long as the engine takes to write their points
// (150 ns a point), and it fsyncs the queue every 12 MB (a second of
// that), so that the queue's background work runs at the pace of real
// ingest. append-ns/op is the time in prepare and commit alone.
func BenchmarkQueueAppend(b *testing.B) {
	for _, size := range []int{1200, 120_000} {
		for _, mapped := range []bool{true, false} {
			name := fmt.Sprintf("frame=%d/write", size)
			if mapped {
				name = fmt.Sprintf("frame=%d/mapped", size)
			}
			b.Run(name, func(b *testing.B) {
				q, _, err := openQueue(b.TempDir(), defaultSegBytes, 1<<62, quiet(), time.Now)
				if err != nil {
					b.Fatal(err)
				}
				defer q.close()
				if !mapped {
					q.wmu.Lock()
					q.noMap = true
					q.rollNext = true
					q.wmu.Unlock()
				}
				payload := bytes.Repeat([]byte{7}, size)
				ingest := time.Duration(size/12) * 150 * time.Nanosecond
				seq, unsynced := uint64(0), 0
				var in time.Duration
				for b.Loop() {
					for t := time.Now(); time.Since(t) < ingest; {
					}
					seq++
					t := time.Now()
					if err := q.prepare(seq, size/12, 1, payload); err != nil {
						b.Fatal(err)
					}
					q.commit(seq, true)
					in += time.Since(t)
					if unsynced += size; unsynced >= 12<<20 {
						// A second of ingest: as the forwarder's sync loop
						// and sender would, fsync and move the reader.
						unsynced = 0
						if err := q.sync(); err != nil {
							b.Fatal(err)
						}
						q.mu.Lock()
						q.rd = readPos{num: q.files[len(q.files)-1].num, off: q.files[len(q.files)-1].size}
						q.mu.Unlock()
					}
				}
				b.ReportMetric(float64(in.Nanoseconds())/float64(b.N), "append-ns/op")
				b.ReportMetric(float64(in.Nanoseconds())/float64(b.N)/float64(size/12), "append-ns/point")
				if mapped != (q.amap != nil) {
					b.Fatalf("mapped %v, file mapped %v", mapped, q.amap != nil)
				}
			})
		}
	}
}
