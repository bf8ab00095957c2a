package wal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/vfs"
)

// rec is a record as Replay delivered it.
type rec struct {
	file    uint64
	typ     byte
	payload []byte
}

// payloadFor returns a deterministic payload of varied length for record i.
func payloadFor(i int) []byte {
	p := fmt.Appendf(nil, "record %d|", i)
	for j := range i % 97 {
		p = append(p, byte('a'+j%26))
	}
	return p
}

func replayAll(t *testing.T, fs vfs.FS, dir string, from uint64) ([]rec, ReplayResult, error) {
	t.Helper()
	var recs []rec
	res, err := Replay(fs, dir, from, func(file uint64, typ byte, payload []byte) error {
		recs = append(recs, rec{file: file, typ: typ, payload: bytes.Clone(payload)})
		return nil
	})
	return recs, res, err
}

func mustOpen(t *testing.T, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func mustClose(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// writeN appends records first..first+n-1 (type 1 + i%3) and returns them.
func writeN(t *testing.T, l *Log, first, n int) ([]rec, []Pos) {
	t.Helper()
	var recs []rec
	var poss []Pos
	for i := first; i < first+n; i++ {
		typ := byte(1 + i%3)
		p := payloadFor(i)
		pos, err := l.Append(typ, p)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		recs = append(recs, rec{file: pos.File, typ: typ, payload: p})
		poss = append(poss, pos)
	}
	return recs, poss
}

func equalRecs(t *testing.T, got, want []rec) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("replayed %d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.file != w.file || g.typ != w.typ || !bytes.Equal(g.payload, w.payload) {
			t.Fatalf("record %d: got file %d type %d %q, want file %d type %d %q",
				i, g.file, g.typ, g.payload, w.file, w.typ, w.payload)
		}
	}
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	nums, err := Files(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, n := range nums {
		fi, err := os.Stat(filepath.Join(dir, FileName(n)))
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
	}
	return total
}

func TestFileNames(t *testing.T) {
	for _, n := range []uint64{1, 42, 99999999, 100000000, 1<<64 - 1} {
		name := FileName(n)
		got, ok := ParseFileName(name)
		if !ok || got != n {
			t.Errorf("ParseFileName(%q) = %d, %v; want %d", name, got, ok, n)
		}
	}
	if FileName(7) != "00000007.wal" {
		t.Errorf("FileName(7) = %q", FileName(7))
	}
	for _, name := range []string{"", ".wal", "00000000.wal", "0000007.wal", "000000007.wal",
		"0000000x.wal", "00000007.wal.tmp", "00000007.seg", "+0000007.wal", "99999999999999999999.wal"} {
		if n, ok := ParseFileName(name); ok {
			t.Errorf("ParseFileName(%q) = %d, true; want false", name, n)
		}
	}
}

func TestRoundTripAcrossRolls(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{SegmentBytes: 512})
	want, poss := writeN(t, l, 0, 300)
	for i := 1; i < len(poss); i++ {
		if !poss[i-1].Less(poss[i]) {
			t.Fatalf("positions not increasing: %v then %v", poss[i-1], poss[i])
		}
	}
	if got := l.Size(); got != dirSize(t, dir) {
		t.Errorf("Size() = %d, files hold %d", got, dirSize(t, dir))
	}
	mustClose(t, l)
	if err := l.Close(); !errors.Is(err, base.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	if _, err := l.Write(RecordBatch, []byte("x")); !errors.Is(err, base.ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}

	nums, err := Files(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(nums) < 10 {
		t.Fatalf("%d files after 300 records with 512-byte segments; want many rolls", len(nums))
	}
	for i, n := range nums {
		if n != uint64(i+1) {
			t.Fatalf("files %v not numbered 1..n", nums)
		}
		// No file grows past the limit by more than one record.
		fi, err := os.Stat(filepath.Join(dir, FileName(n)))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 512+recordHeaderSize+200 {
			t.Errorf("file %d has %d bytes", n, fi.Size())
		}
	}
	got, res, err := replayAll(t, nil, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	equalRecs(t, got, want)
	if res.Files != len(nums) || res.Records != len(want) || res.LastFile != nums[len(nums)-1] || res.Truncated {
		t.Errorf("result %+v", res)
	}

	// Reopen: a new file past the highest; old records stay, new ones follow.
	l = mustOpen(t, dir, Options{SegmentBytes: 512})
	if cur := l.CurrentFile(); cur != nums[len(nums)-1]+1 {
		t.Errorf("reopened log writes file %d, want %d", cur, nums[len(nums)-1]+1)
	}
	more, _ := writeN(t, l, 300, 50)
	mustClose(t, l)
	got, _, err = replayAll(t, nil, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	equalRecs(t, got, append(want, more...))

	// Replay from a file number skips the files below it.
	from := more[0].file
	got, res, err = replayAll(t, nil, dir, from)
	if err != nil {
		t.Fatal(err)
	}
	equalRecs(t, got, more)
	if res.Files == 0 || res.LastFile < from {
		t.Errorf("result %+v", res)
	}
}

func TestRotateRemoveBefore(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{})
	before, _ := writeN(t, l, 0, 20)
	n, err := l.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range before {
		if r.file >= n {
			t.Fatalf("record written before Rotate is in file %d, Rotate returned %d", r.file, n)
		}
	}
	if l.CurrentFile() != n {
		t.Fatalf("current file %d, Rotate returned %d", l.CurrentFile(), n)
	}
	after, _ := writeN(t, l, 20, 20)
	for _, r := range after {
		if r.file != n {
			t.Fatalf("record written after Rotate is in file %d, want %d", r.file, n)
		}
	}
	n2, err := l.Rotate()
	if err != nil || n2 != n+1 {
		t.Fatalf("second Rotate = %d, %v; want %d", n2, err, n+1)
	}
	last, _ := writeN(t, l, 40, 5)

	if err := l.RemoveBefore(n); err != nil {
		t.Fatal(err)
	}
	nums, err := Files(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(nums) != 2 || nums[0] != n || nums[1] != n2 {
		t.Fatalf("files after RemoveBefore(%d): %v", n, nums)
	}
	if got := l.Size(); got != dirSize(t, dir) {
		t.Errorf("Size() = %d, files hold %d", got, dirSize(t, dir))
	}
	// The current file is never removed.
	if err := l.RemoveBefore(1 << 40); err != nil {
		t.Fatal(err)
	}
	nums, _ = Files(vfs.Default, dir)
	if len(nums) != 1 || nums[0] != n2 {
		t.Fatalf("files after RemoveBefore(huge): %v; want only the current %d", nums, n2)
	}
	if got := l.Size(); got != dirSize(t, dir) {
		t.Errorf("Size() = %d, files hold %d", got, dirSize(t, dir))
	}
	mustClose(t, l)
	got, _, err := replayAll(t, nil, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	equalRecs(t, got, last)
	if err := l.RemoveBefore(1); !errors.Is(err, base.ErrClosed) {
		t.Errorf("RemoveBefore after Close = %v, want ErrClosed", err)
	}
}

func TestOpenValidates(t *testing.T) {
	dir := t.TempDir()
	for _, o := range []Options{{SegmentBytes: -1}, {Sync: SyncNever + 1}, {Sync: -1}, {SyncInterval: -1}} {
		if l, err := Open(dir, o); !errors.Is(err, base.ErrInvalid) {
			if l != nil {
				l.Close()
			}
			t.Errorf("Open(%+v) = %v, want ErrInvalid", o, err)
		}
	}
	l := mustOpen(t, filepath.Join(dir, "a", "b"), Options{})
	defer l.Close()
	if _, err := l.Write(0, nil); !errors.Is(err, base.ErrInvalid) {
		t.Errorf("Write(type 0) = %v, want ErrInvalid", err)
	}
	// Rejected input does not fail the log.
	if _, err := l.Append(RecordBatch, nil); err != nil {
		t.Errorf("Append after rejected input: %v", err)
	}
	if err := l.SyncTo(Pos{File: 1 << 40}); !errors.Is(err, base.ErrInvalid) {
		t.Errorf("SyncTo(past the end) = %v, want ErrInvalid", err)
	}
}

func TestSyncModes(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNever} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			l := mustOpen(t, dir, Options{Sync: mode, SyncInterval: 1e6})
			base0 := l.SyncCount()
			want, poss := writeN(t, l, 0, 10)
			if err := l.SyncTo(poss[len(poss)-1]); err != nil {
				t.Fatal(err)
			}
			fsyncs := l.SyncCount() - base0
			switch mode {
			case SyncAlways:
				if fsyncs != 10 {
					t.Errorf("%d fsyncs for 10 sequential appends, want 10", fsyncs)
				}
			case SyncNever:
				if fsyncs != 0 {
					t.Errorf("%d fsyncs under SyncNever, want 0", fsyncs)
				}
			}
			mustClose(t, l)
			// Close made everything durable: SyncTo of an old position succeeds.
			if err := l.SyncTo(poss[0]); err != nil {
				t.Errorf("SyncTo after Close of a synced pos: %v", err)
			}
			got, _, err := replayAll(t, nil, dir, 1)
			if err != nil {
				t.Fatal(err)
			}
			equalRecs(t, got, want)
		})
	}
}

// TestSyncIntervalSyncs checks that the background goroutine fsyncs written
// records with no SyncTo call: the FS reports the fsync on a channel.
func TestSyncIntervalSyncs(t *testing.T) {
	var armed atomic.Bool
	fsynced := make(chan string, 1)
	fs := vfs.Inject(vfs.Default, func(op vfs.Op, name string) error {
		if op == vfs.OpSync && armed.Load() {
			select {
			case fsynced <- name:
			default:
			}
		}
		return nil
	})
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{FS: fs, Sync: SyncInterval, SyncInterval: time.Millisecond})
	armed.Store(true)
	pos, err := l.Write(RecordBatch, []byte("interval"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SyncTo(pos); err != nil { // returns at once
		t.Fatal(err)
	}
	select {
	case name := <-fsynced:
		if name != filepath.Join(dir, FileName(pos.File)) {
			t.Errorf("background fsync of %s, want the current file", name)
		}
	case <-time.After(30 * time.Second): // a deadline, not a wait for the syncer
		t.Fatal("no background fsync within 30s at a 1ms interval")
	}
	mustClose(t, l)
}

// Open numbers its new file at least MinFile, past every existing file.
func TestOpenMinFile(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{MinFile: 7})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.CurrentFile(); got != 7 {
		t.Fatalf("first file %d, want 7 (MinFile)", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, Options{MinFile: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := l.CurrentFile(); got != 8 {
		t.Fatalf("file after an existing 7 with MinFile 3: %d, want 8", got)
	}
}

// Discard removes every file without an fsync and closes the log.
func TestDiscard(t *testing.T) {
	dir := t.TempDir()
	inj := &vfs.OnIndex{N: 1 << 30, Match: onOp(vfs.OpSync)} // counts fsyncs, fails none
	l := mustOpen(t, dir, Options{FS: vfs.Inject(vfs.Default, inj.Injector()), Sync: SyncNever, SegmentBytes: 256})
	writeN(t, l, 0, 20) // several files
	syncs := inj.Count()
	if err := l.Discard(); err != nil {
		t.Fatal(err)
	}
	if got := inj.Count(); got != syncs {
		t.Errorf("Discard fsynced %d times", got-syncs)
	}
	if nums, err := Files(nil, dir); err != nil || len(nums) != 0 {
		t.Fatalf("files after Discard: %v, %v", nums, err)
	}
	if err := l.Discard(); !errors.Is(err, base.ErrClosed) {
		t.Errorf("second Discard = %v, want ErrClosed", err)
	}
	if err := l.Close(); !errors.Is(err, base.ErrClosed) {
		t.Errorf("Close after Discard = %v, want ErrClosed", err)
	}
}

// Sync makes everything written durable even under SyncNever.
func TestSyncAnyMode(t *testing.T) {
	inj := &vfs.OnIndex{N: 1 << 30, Match: onOp(vfs.OpSync)} // counts fsyncs
	l := mustOpen(t, t.TempDir(), Options{FS: vfs.Inject(vfs.Default, inj.Injector()), Sync: SyncNever})
	defer l.Close()
	pos, err := l.Write(RecordBatch, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	before := inj.Count()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if inj.Count() != before+1 {
		t.Fatalf("Sync made %d fsyncs, want 1", inj.Count()-before)
	}
	if err := l.Sync(); err != nil || inj.Count() != before+1 {
		t.Fatalf("second Sync with nothing new: err %v, %d fsyncs", err, inj.Count()-before)
	}
	l.mu.Lock()
	synced := !l.mu.synced.Less(pos)
	l.mu.Unlock()
	if !synced {
		t.Fatal("record not marked durable after Sync")
	}
}
