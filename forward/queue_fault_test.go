package forward

import (
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/vfs"
)

// The fault-injection tests of the queue run it on vfs.MemFS, the
// simulated filesystem of the engine's tests: every byte of every file
// flipped, every file cut at every length and removed, a full disk.

const memDir = "q"

func memQueue(t *testing.T, fs vfs.FS, segBytes int64, rollAge time.Duration, recovered uint64, now func() time.Time) (*queue, *logRecorder) {
	t.Helper()
	rec := &logRecorder{}
	q, _, err := openQueueConfig(queueConfig{fs: fs, dir: memDir, segBytes: segBytes, rollAge: rollAge,
		recovered: recovered, logger: slog.New(rec), now: now})
	if err != nil {
		t.Fatal(err)
	}
	return q, rec
}

// faultQueue is a closed queue of 12 frames in 3 files on a MemFS, and
// what each file holds.
type faultQueue struct {
	m       *vfs.MemFS
	samples map[uint64]int64 // by seq
	total   int64
	files   []faultFile
}

type faultFile struct {
	name   string
	data   []byte
	frames []faultFrame
}

type faultFrame struct {
	off, end int64
	seq      uint64
}

func buildFaultQueue(t *testing.T) *faultQueue {
	t.Helper()
	fq := &faultQueue{m: vfs.NewMem(), samples: map[uint64]int64{}}
	q, _ := memQueue(t, fq.m, 200, 0, 1<<62, time.Now)
	for s := uint64(1); s <= 12; s++ {
		n := int(s%3 + 1)
		put(t, q, s, n)
		fq.samples[s] = int64(n)
		fq.total += int64(n)
	}
	if err := q.close(); err != nil {
		t.Fatal(err)
	}
	names, _ := fq.m.ReadDir(memDir)
	for _, name := range names {
		if _, ok := parseQueueFileName(name); !ok {
			continue
		}
		data, err := vfs.ReadFile(fq.m, path.Join(memDir, name))
		if err != nil {
			t.Fatal(err)
		}
		ff := faultFile{name: name, data: data}
		for off := int64(queueHeaderSize); off < int64(len(data)); {
			fr, need, err := parseFrame(queueVersion, data[off:])
			if err != nil {
				t.Fatalf("%s at %d: %v", name, off, err)
			}
			ff.frames = append(ff.frames, faultFrame{off, off + need, fr.seq})
			off += need
		}
		if len(ff.frames) > 0 {
			fq.files = append(fq.files, ff)
		}
	}
	if len(fq.files) != 3 {
		t.Fatalf("%d queue files, want 3", len(fq.files))
	}
	return fq
}

// reopen opens a copy of the queue with file name replaced by data (nil:
// removed), reads it all, and returns the samples read and counted lost.
// It then opens the copy a second time and checks that the damage, still
// on disk, is not counted again and that the same frames are read.
func (fq *faultQueue) reopen(t *testing.T, name string, data []byte) (read, damaged int64, msgs []string) {
	t.Helper()
	m := fq.m.Clone()
	p := path.Join(memDir, name)
	if data == nil {
		if err := m.Remove(p); err != nil {
			t.Fatal(err)
		}
	} else {
		f, err := m.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data)
		f.Close()
	}
	again := m.Clone()
	read, damaged, msgs = fq.readAll(t, m)
	read2, damaged2, msgs2 := fq.readAll(t, again)
	if read2 != read || damaged2 != damaged {
		t.Fatalf("%s: a second open of the damaged queue read %d counted %d, the first %d and %d; logs %q then %q",
			name, read2, damaged2, read, damaged, msgs, msgs2)
	}
	// A third open, after the second one ran to its end: nothing new.
	if read3, damaged3, msgs3 := fq.readAll(t, again); read3 != 0 || damaged3 != 0 {
		t.Fatalf("%s: an open after the queue was read read %d counted %d; log %q", name, read3, damaged3, msgs3)
	}
	return read, damaged, msgs
}

// readAll opens the queue on m, reads every frame, acknowledges them and
// closes it cleanly; it returns the samples read and counted lost.
func (fq *faultQueue) readAll(t *testing.T, m *vfs.MemFS) (read, damaged int64, msgs []string) {
	t.Helper()
	q, rec := memQueue(t, m, 200, 0, 1<<62, time.Now)
	defer q.close()
	var rb readBuf
	var seqs []uint64
	var last frame
	for {
		fr, ok, err := q.next(&rb)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		seqs = append(seqs, fr.seq)
		last = fr
	}
	if !slices.IsSorted(seqs) || len(slices.Compact(slices.Clone(seqs))) != len(seqs) {
		t.Fatalf("frames out of order: %v", seqs)
	}
	for _, s := range seqs {
		read += fq.samples[s]
	}
	if len(seqs) > 0 {
		c := cursor{seq: last.seq, done: last.samples, count: last.count + uint64(last.samples), countOK: true}
		if err := q.saveCursor(c); err != nil {
			t.Fatal(err)
		}
		if err := q.removeDone(c); err != nil {
			t.Fatal(err)
		}
	}
	q.mu.Lock()
	damaged = q.damaged
	q.mu.Unlock()
	return read, damaged, rec.take()
}

func (fq *faultQueue) sum(frames []faultFrame) int64 {
	var n int64
	for _, f := range frames {
		n += fq.samples[f.seq]
	}
	return n
}

// Every byte of every queue file flipped in turn: the queue always opens,
// loses exactly the frame the byte is in (the whole file for a byte of
// its header, set aside), reads every other frame, counts the loss
// exactly and logs it, and does not count it again at the next open.
func TestQueueFaultFlipEveryByte(t *testing.T) {
	fq := buildFaultQueue(t)
	for _, ff := range fq.files {
		for i := range ff.data {
			data := slices.Clone(ff.data)
			data[i] ^= 0x5a
			read, damaged, msgs := fq.reopen(t, ff.name, data)
			want := fq.sum(ff.frames) // a byte of the file header
			for _, fr := range ff.frames {
				if int64(i) >= fr.off && int64(i) < fr.end {
					want = fq.samples[fr.seq]
				}
			}
			if lost := fq.total - read; lost != want || damaged != want {
				t.Fatalf("%s byte %d flipped: lost %d counted %d, want %d (the frame it is in); log %q", ff.name, i, lost, damaged, want, msgs)
			}
			if len(msgs) == 0 || !strings.Contains(strings.Join(msgs, "\n"), "forward: ") {
				t.Fatalf("%s byte %d flipped: nothing logged", ff.name, i)
			}
		}
	}
}

// Every file cut at every length: the queue opens, reads every frame
// before the cut, and counts exactly the samples of the frames cut (the
// oldest file's through its header start, the newest file's through the
// cursor's queued count written by the clean close).
func TestQueueFaultCut(t *testing.T) {
	fq := buildFaultQueue(t)
	for _, ff := range fq.files {
		for k := range ff.data {
			read, damaged, msgs := fq.reopen(t, ff.name, ff.data[:k])
			var want int64
			for _, fr := range ff.frames {
				if fr.end > int64(k) {
					want += fq.samples[fr.seq]
				}
			}
			if lost := fq.total - read; lost != want || damaged != want {
				t.Fatalf("%s cut at %d: lost %d counted %d, want %d; log %q", ff.name, k, lost, damaged, want, msgs)
			}
			if want > 0 && len(msgs) == 0 {
				t.Fatalf("%s cut at %d: nothing logged", ff.name, k)
			}
		}
	}
}

// A removed file, first, middle or last, is detected and its loss counted
// exactly: the oldest against the cursor's settled count, a middle one by
// the gap in the counts, the newest against the cursor's queued count.
func TestQueueFaultRemoveFile(t *testing.T) {
	fq := buildFaultQueue(t)
	for _, ff := range fq.files {
		read, damaged, msgs := fq.reopen(t, ff.name, nil)
		want := fq.sum(ff.frames)
		if lost := fq.total - read; lost != want || damaged != want {
			t.Fatalf("%s removed: lost %d counted %d, want %d; log %q", ff.name, lost, damaged, want, msgs)
		}
		if !strings.Contains(strings.Join(msgs, "\n"), "lost") {
			t.Fatalf("%s removed: loss not logged: %q", ff.name, msgs)
		}
	}
}

// With part of the oldest file delivered, its removal loses only the rest,
// and that is what is counted.
func TestQueueFaultRemovePartlyDelivered(t *testing.T) {
	fq := buildFaultQueue(t)
	m := fq.m.Clone()
	q, _ := memQueue(t, m, 200, 0, 1<<62, time.Now)
	var rb readBuf
	fr, ok, err := q.next(&rb)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	// The first frame delivered, and one sample of the second.
	fr2, _, _ := q.next(&rb)
	c := cursor{seq: fr2.seq, done: 1, count: fr2.count + 1, countOK: true}
	q.saveCursor(c)
	q.close()
	first := fq.files[0]
	if err := m.Remove(path.Join(memDir, first.name)); err != nil {
		t.Fatal(err)
	}
	q2, rec := memQueue(t, m, 200, 0, 1<<62, time.Now)
	defer q2.close()
	want := fq.sum(first.frames) - int64(fr.samples) - 1
	if q2.damaged != want {
		t.Fatalf("counted %d lost, want %d; log %q", q2.damaged, want, rec.take())
	}
}

// After a crash (no clean close) the newest file's lost end is counted up
// to the cursor's last write: a lower bound, and logged as one.
func TestQueueFaultRemoveNewestAfterCrash(t *testing.T) {
	m := vfs.NewMem()
	q, _ := memQueue(t, m, 200, 0, 1<<62, time.Now)
	for s := uint64(1); s <= 12; s++ {
		put(t, q, s, 2)
		if s == 10 {
			if err := q.sync(); err != nil { // the sync tick writes the cursor
				t.Fatal(err)
			}
		}
	}
	crashed := m.Clone() // a kill -9: the page cache, no close
	q.close()
	q.mu.Lock()
	newest := q.files[len(q.files)-1]
	q.mu.Unlock()
	if err := crashed.Remove(path.Join(memDir, newest.name())); err != nil {
		t.Fatal(err)
	}
	q2, rec := memQueue(t, crashed, 200, 0, 1<<62, time.Now)
	defer q2.close()
	lost := int64(newest.end - newest.start)
	bound := lost - 2*2 // frames 11 and 12 were queued after the cursor's last write
	msgs := strings.Join(rec.take(), "\n")
	if q2.damaged != bound || !strings.Contains(msgs, "lower bound") {
		t.Fatalf("counted %d lost of %d (bound %d); log %q", q2.damaged, lost, bound, msgs)
	}
}

// Damage at a place the cursor says was delivered is not a loss.
func TestQueueFaultDeliveredNotCounted(t *testing.T) {
	fq := buildFaultQueue(t)
	ff := fq.files[0]
	m := fq.m.Clone()
	c, _ := m.Create(path.Join(memDir, cursorName))
	c.Write(cursor{seq: ff.frames[len(ff.frames)-1].seq, done: 0}.marshalV1())
	c.Close()
	data := slices.Clone(ff.data)
	data[ff.frames[0].end-1] ^= 1 // the first frame's payload, delivered
	f, _ := m.Create(path.Join(memDir, ff.name))
	f.Write(data)
	f.Close()
	q, rec := memQueue(t, m, 200, 0, 1<<62, time.Now)
	defer q.close()
	if q.damaged != 0 {
		t.Fatalf("counted %d lost before the cursor; log %q", q.damaged, rec.take())
	}
}

// A frame is delivered only once the database says its write was kept; a
// write the database undid (its WAL fsync failed) is never read.
func TestQueueResolve(t *testing.T) {
	q, _ := memQueue(t, vfs.NewMem(), 1<<20, 0, 1<<62, time.Now)
	defer q.close()
	q.resolving = true
	for s := uint64(1); s <= 4; s++ {
		put(t, q, s, 1)
	}
	equalSeqs(t, drain(t, q)) // nothing resolved yet
	q.resolve(2, false)
	equalSeqs(t, drain(t, q)) // 1 is not resolved
	q.resolve(1, true)
	q.resolve(4, true)
	equalSeqs(t, drain(t, q), 1) // 2 undone, 3 not resolved
	q.resolve(3, true)
	equalSeqs(t, drain(t, q), 3, 4)
	if q.backlog != 0 || len(q.aborted) != 0 || len(q.unresolved) != 0 {
		t.Fatalf("backlog %d aborted %v unresolved %v", q.backlog, q.aborted, q.unresolved)
	}
	q.resolve(9, false) // unknown: ignored
}

// fakeClock is a clock tests move by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// While writes go on, the active file ages out too: the writer starts a
// new file when the active one's first frame passes rollAge, so trim drops
// what is older than the age bound although the newest file is never idle.
func TestQueueAgeWhileWriting(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	const age = 2 * time.Second
	q, _ := memQueue(t, vfs.NewMem(), 64<<20, rollAge(age), 1<<62, clk.now)
	defer q.close()
	var dropped, total int64
	for s := uint64(1); s <= 100; s++ { // a write every 100 ms, 10 s
		put(t, q, s, 1)
		total++
		clk.t = clk.t.Add(100 * time.Millisecond)
		dropped += q.trim(1<<40, clk.t.Add(-age).UnixNano())
	}
	// What is left is at most age plus a roll interval old.
	q.mu.Lock()
	left := q.backlog
	q.mu.Unlock()
	maxLeft := int64((age + rollAge(age)) / (100 * time.Millisecond))
	if dropped == 0 || left > maxLeft+1 || dropped+left != total {
		t.Fatalf("dropped %d, left %d (at most %d), of %d", dropped, left, maxLeft+1, total)
	}
}

// Version 1 files, written before frames had a magic and a count, are
// still read; new frames go to version 2 files after them.
func TestQueueReadsVersion1(t *testing.T) {
	m := vfs.NewMem()
	if err := m.MkdirAll(memDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for num, seqs := range map[uint64][]uint64{1: {1, 2}, 2: {3}} {
		data := appendQueueHeaderV1(nil, num)
		for _, s := range seqs {
			data = appendFrameV1(data, s, 0, 1, 1, []byte(fmt.Sprintf("payload %d", s)))
		}
		f, err := m.Create(path.Join(memDir, queueFileName(num)))
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data)
		f.Close()
	}
	q, rec := memQueue(t, m, 1<<20, 0, 1<<62, time.Now)
	equalSeqs(t, drain(t, q), 1, 2, 3)
	put(t, q, 4, 2)
	q.close()
	if msgs := rec.take(); len(msgs) != 0 {
		t.Errorf("logged %q", msgs)
	}
	q2, _ := memQueue(t, m, 1<<20, 0, 1<<62, time.Now)
	defer q2.close()
	equalSeqs(t, drain(t, q2), 1, 2, 3, 4)
	if q2.damaged != 0 || q2.files[len(q2.files)-2].version != queueVersion {
		t.Fatalf("damaged %d, files %+v", q2.damaged, q2.files)
	}
}

// Damage that appears while the queue runs (after Open scanned it) is
// skipped to the next good frame too, counted exactly.
func TestQueueFaultWhileRunning(t *testing.T) {
	for _, at := range []string{"payload", "header"} {
		t.Run(at, func(t *testing.T) {
			m := vfs.NewMem()
			q, _ := memQueue(t, m, 1<<20, 0, 1<<62, time.Now)
			defer q.close()
			for s := uint64(1); s <= 5; s++ {
				put(t, q, s, int(s))
			}
			p := path.Join(memDir, q.files[0].name())
			data, err := vfs.ReadFile(m, p)
			if err != nil {
				t.Fatal(err)
			}
			// Frame 2 starts after frame 1.
			_, need, _ := parseFrame(queueVersion, data[queueHeaderSize:])
			off := queueHeaderSize + need + 2 // its magic
			if at == "payload" {
				off = queueHeaderSize + need + frameHeaderSize + 1
			}
			data[off] ^= 0xff
			f, _ := m.Create(p)
			f.Write(data)
			f.Close()
			equalSeqs(t, drain(t, q), 1, 3, 4, 5)
			if q.damaged != 2 || q.backlog != 0 {
				t.Fatalf("damaged %d backlog %d, want 2 and 0", q.damaged, q.backlog)
			}
			put(t, q, 6, 1)
			equalSeqs(t, drain(t, q), 6)
		})
	}
}

// A big queue file on a disk with less free space than a file header: the
// queue opens (the old cursor whole), reads and delivers what it holds,
// counts the batches it cannot queue, and queues again, by itself, once
// the delivered file is removed and its space is back.
func TestQueueFullDiskBigFile(t *testing.T) {
	m := vfs.NewMem()
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	q, _ := memQueue(t, m, 1<<20, 0, 1<<62, clk.now)
	var total int64
	for s := uint64(1); s <= 50; s++ {
		put(t, q, s, 3)
		total += 3
	}
	var rb readBuf
	fr, _, _ := q.next(&rb)
	c := cursor{seq: fr.seq, done: fr.samples, count: fr.count + uint64(fr.samples), countOK: true}
	if err := q.saveCursor(c); err != nil {
		t.Fatal(err)
	}
	if err := q.close(); err != nil {
		t.Fatal(err)
	}
	m.SetCapacity(m.Used() + queueHeaderSize - 1)

	q2, rec := memQueue(t, m, 1<<20, 0, 1<<62, clk.now)
	defer q2.close()
	if err := q2.prepare(51, 5, 1, []byte("payload 51")); err == nil {
		t.Fatal("queued a frame on a full disk")
	}
	if pub, lost := q2.commit(51, true); pub != 0 || lost != 5 {
		t.Fatalf("on a full disk: published %d lost %d, want 0 and 5", pub, lost)
	}
	seqs := drain(t, q2)
	// The reader starts at the oldest frame; the sender skips those the
	// cursor says were delivered.
	if len(seqs) != 50 || q2.damaged != 0 {
		t.Fatalf("read %v after a restart on a full disk (damaged %d); log %q", seqs, q2.damaged, rec.take())
	}
	last := seqs[len(seqs)-1]
	c = cursor{seq: last, done: 3, count: uint64(total), countOK: true}
	if err := q2.saveCursor(c); err != nil {
		t.Fatal(err)
	}
	if err := q2.removeDone(c); err != nil {
		t.Fatal(err)
	}
	// The delivered file is gone: the next batch starts a file at once,
	// without waiting for the retry time.
	put(t, q2, 52, 4)
	equalSeqs(t, drain(t, q2), 52)
	if err := q2.close(); err != nil {
		t.Fatal(err)
	}
	q3, rec3 := memQueue(t, m, 1<<20, 0, 1<<62, clk.now)
	defer q3.close()
	if cur := q3.acked; cur.seq != 50 || cur.done != 3 {
		t.Fatalf("cursor after a full disk %+v, want 50/3", cur)
	}
	if got := drain(t, q3); len(got) != 1 || got[0] != 52 || q3.damaged != 0 {
		t.Fatalf("after recovery: read %v damaged %d; log %q", got, q3.damaged, rec3.take())
	}
}
