package forward

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// logRecorder keeps the messages of the records logged at Warn and above.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, rec.Message)
	r.mu.Unlock()
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

func (r *logRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.msgs
	r.msgs = nil
	return m
}

func openRecorded(t *testing.T, dir string, segBytes int64, recovered uint64) (*queue, *logRecorder) {
	t.Helper()
	rec := &logRecorder{}
	q, _, err := openQueue(dir, segBytes, recovered, slog.New(rec), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return q, rec
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// frameBytes is the encoding of the frame put writes for seq.
func frameBytes(seq uint64) []byte {
	return appendFrame(nil, seq, 0, 1, 1, seq-1, fmt.Appendf(nil, "payload %d", seq))
}

// fileOf is the size of a queue file holding the frames put writes for
// seqs.
func fileOf(seqs ...uint64) int64 {
	n := int64(queueHeaderSize)
	for _, s := range seqs {
		n += int64(len(frameBytes(s)))
	}
	return n
}

// wholeFrames checks that the file at path is a header and whole frames,
// nothing after them, and returns their seqs.
func wholeFrames(t *testing.T, path string) []uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for off := queueHeaderSize; off < len(b); {
		fr, need, err := parseFrame(queueVersion, b[off:])
		if err != nil {
			t.Fatalf("%s: %v at %d of %d bytes", path, err, off, len(b))
		}
		seqs = append(seqs, fr.seq)
		off += int(need)
	}
	return seqs
}

// After a kill -9 the newest file is left at its preallocated size, zeros
// after its last frame (and after a frame removed because the database
// did not log it): reopening reads every frame, counts and logs nothing
// lost, and cuts the file to its frames.
func TestQueuePreallocatedTailAfterCrash(t *testing.T) {
	dir := t.TempDir()
	q, _ := openRecorded(t, dir, 1<<20, 0)
	defer q.close()
	for s := uint64(1); s <= 5; s++ {
		put(t, q, s, 2)
	}
	// Frames the WAL write failed for, one copied into the mapping, one
	// written with pwritev(2): removed, zeros again.
	for _, n := range []int{9, 2 * mapFrameMax} {
		if err := q.prepare(6, 2, 1, bytes.Repeat([]byte("6"), n)); err != nil {
			t.Fatal(err)
		}
		q.commit(6, false)
	}
	path := lastQueueFile(t, dir)
	if runtime.GOOS == "linux" {
		if got := fileSize(t, path); got != 1<<20 {
			t.Fatalf("active file is %d bytes, want preallocated to %d", got, 1<<20)
		}
		b, _ := os.ReadFile(path)
		if !allZero(b[fileOf(1, 2, 3, 4, 5):]) {
			t.Fatal("bytes after the last frame are not zeros")
		}
	}
	// No close: a kill -9. The database recovered seq 5.
	q2, rec := openRecorded(t, dir, 1<<20, 5)
	defer q2.close()
	equalSeqs(t, drain(t, q2), 1, 2, 3, 4, 5)
	if msgs := rec.take(); len(msgs) != 0 {
		t.Errorf("reopening after a clean preallocated end logged %q", msgs)
	}
	if q2.damaged != 0 || q2.backlog != 0 {
		t.Errorf("damaged %d backlog %d", q2.damaged, q2.backlog)
	}
	if got, want := fileSize(t, path), fileOf(1, 2, 3, 4, 5); got != want {
		t.Errorf("reopened file is %d bytes, want cut to its frames' %d", got, want)
	}
	equalSeqs(t, wholeFrames(t, path), 1, 2, 3, 4, 5)
	put(t, q2, 6, 1)
	if lastQueueFile(t, dir) == path {
		t.Error("reopened queue appends to a file it did not create")
	}
	equalSeqs(t, drain(t, q2), 6)
}

// A frame torn by a kill -9 in the middle of its copy, followed by the
// preallocated zeros, is a torn tail: cut off and logged, the frames
// before it kept.
func TestQueueTornFrameBeforeZeros(t *testing.T) {
	for _, cut := range []int{1, 8, frameHeaderSize, frameHeaderSize + 3} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			dir := t.TempDir()
			data := appendQueueHeader(nil, 1, 0)
			data = append(data, frameBytes(1)...)
			data = append(data, frameBytes(2)...)
			good := int64(len(data))
			data = append(data, frameBytes(3)[:cut]...)
			data = append(data, make([]byte, 64<<10)...)
			path := filepath.Join(dir, queueFileName(1))
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			q, rec := openRecorded(t, dir, 1<<20, 3)
			defer q.close()
			equalSeqs(t, drain(t, q), 1, 2)
			msgs := rec.take()
			if len(msgs) != 1 || !strings.Contains(msgs[0], "torn queue tail") {
				t.Errorf("logged %q, want the torn tail", msgs)
			}
			// Once its header is whole, the torn frame's samples are known:
			// the database logged it (recovered 3), so they are lost.
			if want := int64(map[bool]int{true: 1}[cut >= frameHeaderSize]); q.damaged != want {
				t.Errorf("damaged %d, want %d", q.damaged, want)
			}
			if got := fileSize(t, path); got != good {
				t.Errorf("file is %d bytes, want cut to %d", got, good)
			}
		})
	}
}

// A file is cut to its frames and fsynced when the next one starts, and
// the active one on close: only the newest file ever holds preallocated
// zeros, and a queue closed cleanly holds none.
func TestQueueRollCutsFiles(t *testing.T) {
	dir := t.TempDir()
	q, _ := openRecorded(t, dir, 64<<10, 1<<62)
	payload := bytes.Repeat([]byte("x"), 10<<10)
	for s := uint64(1); s <= 20; s++ {
		if err := q.prepare(s, 1, 1, payload); err != nil {
			t.Fatal(err)
		}
		q.commit(s, true)
	}
	var files []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if _, ok := parseQueueFileName(e.Name()); ok {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	if len(files) < 3 {
		t.Fatalf("%d files for 200 KiB in 64 KiB segments", len(files))
	}
	var seqs []uint64
	for _, f := range files[:len(files)-1] {
		seqs = append(seqs, wholeFrames(t, f)...)
	}
	last := files[len(files)-1]
	if runtime.GOOS == "linux" {
		if got := fileSize(t, last); got != 64<<10 {
			t.Errorf("active file is %d bytes, want preallocated to %d", got, 64<<10)
		}
	}
	if err := q.close(); err != nil {
		t.Fatal(err)
	}
	seqs = append(seqs, wholeFrames(t, last)...)
	if len(seqs) != 20 || seqs[0] != 1 || seqs[19] != 20 {
		t.Fatalf("frames %v", seqs)
	}
	q2, rec := openRecorded(t, dir, 64<<10, 1<<62)
	defer q2.close()
	var rb readBuf
	for s := uint64(1); s <= 20; s++ {
		fr, ok, err := q2.next(&rb)
		if err != nil || !ok || fr.seq != s || !bytes.Equal(fr.payload, payload) {
			t.Fatalf("frame %d: ok %v err %v seq %d", s, ok, err, fr.seq)
		}
	}
	if msgs := rec.take(); len(msgs) != 0 {
		t.Errorf("reopening a cleanly closed queue logged %q", msgs)
	}
}

// A frame larger than the segment size, first in its file, grows the file
// rather than being split or lost; frames after it go on as usual.
func TestQueueFrameLargerThanSegment(t *testing.T) {
	dir := t.TempDir()
	q, _ := openRecorded(t, dir, 64<<10, 1<<62)
	big := bytes.Repeat([]byte("y"), 200<<10)
	for s := uint64(1); s <= 4; s++ {
		p := big
		if s%2 == 0 {
			p = []byte("small")
		}
		if err := q.prepare(s, 1, 1, p); err != nil {
			t.Fatal(err)
		}
		if pub, lost := q.commit(s, true); pub != 1 || lost != 0 {
			t.Fatalf("frame %d: published %d lost %d", s, pub, lost)
		}
	}
	// A kill -9: reopen without closing.
	q2, rec := openRecorded(t, dir, 64<<10, 1<<62)
	defer q2.close()
	defer q.close()
	var rb readBuf
	for s := uint64(1); s <= 4; s++ {
		fr, ok, err := q2.next(&rb)
		if err != nil || !ok || fr.seq != s || len(fr.payload) != map[bool]int{true: 5, false: len(big)}[s%2 == 0] {
			t.Fatalf("frame %d: ok %v err %v seq %d, %d bytes", s, ok, err, fr.seq, len(fr.payload))
		}
	}
	if msgs := rec.take(); len(msgs) != 0 {
		t.Errorf("logged %q", msgs)
	}
}

// A power loss right after a file was preallocated can leave it all zeros,
// its header too: when it is the newest, nothing was queued in it, and
// Open goes on. A file that is not the newest and ends in zeros (its cut
// failed) keeps its frames, and the zeros are cut off with a warning.
func TestQueueZeroFiles(t *testing.T) {
	dir := t.TempDir()
	one := appendQueueHeader(nil, 1, 0)
	one = append(one, frameBytes(1)...)
	one = append(one, make([]byte, 8192)...)
	two := appendQueueHeader(nil, 2, 1)
	two = append(two, frameBytes(2)...)
	for n, b := range map[uint64][]byte{1: one, 2: two, 3: make([]byte, 64<<10)} {
		if err := os.WriteFile(filepath.Join(dir, queueFileName(n)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	q, rec := openRecorded(t, dir, 64<<10, 1<<62)
	defer q.close()
	equalSeqs(t, drain(t, q), 1, 2)
	if q.damaged != 0 {
		t.Errorf("damaged %d", q.damaged)
	}
	msgs := rec.take()
	if len(msgs) != 2 || !strings.Contains(msgs[0], "not cut") || !strings.Contains(msgs[1], "torn queue file") {
		t.Errorf("logged %q", msgs)
	}
	if got := fileSize(t, filepath.Join(dir, queueFileName(1))); got != fileOf(1) {
		t.Errorf("file 1 is %d bytes, want %d", got, fileOf(1))
	}
	put(t, q, 3, 1)
	equalSeqs(t, drain(t, q), 3)
}

// Where files are not mapped (other systems, file systems without
// fallocate, or after a fault), frames are appended with write(2): files
// hold no zeros, a failed frame is removed, and a reopen after a crash
// reads every frame.
func TestQueueWriteFallback(t *testing.T) {
	dir := t.TempDir()
	q, _ := openRecorded(t, dir, 1<<20, 1<<62)
	defer q.close()
	q.wmu.Lock()
	q.noMap, q.rollNext = true, true // as if mapping had failed
	q.wmu.Unlock()
	put(t, q, 1, 1)
	if q.amap != nil {
		t.Fatal("file mapped after mapping was turned off")
	}
	path := lastQueueFile(t, dir)
	for _, n := range []int{9, 2 * mapFrameMax} {
		if err := q.prepare(2, 1, 1, bytes.Repeat([]byte("2"), n)); err != nil {
			t.Fatal(err)
		}
		q.commit(2, false)
	}
	put(t, q, 2, 1)
	put(t, q, 3, 1)
	if got, want := fileSize(t, path), fileOf(1, 2, 3); got != want {
		t.Fatalf("file is %d bytes, want %d", got, want)
	}
	q2, rec := openRecorded(t, dir, 1<<20, 1<<62) // a kill -9, then a restart
	defer q2.close()
	equalSeqs(t, drain(t, q2), 1, 2, 3)
	if msgs := rec.take(); len(msgs) != 0 {
		t.Errorf("logged %q", msgs)
	}
}
