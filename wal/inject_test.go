package wal

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/internal/vfs"
)

// onWalWrite matches writes to WAL files (index 0 is Open's header write).
func onOp(op vfs.Op) func(vfs.Op, string) bool {
	return func(o vfs.Op, name string) bool { return o == op && strings.HasSuffix(name, ".wal") }
}

// checkSticky asserts that the log refuses writes with an error wrapping the
// first failure.
func checkSticky(t *testing.T, l *Log, first error) {
	t.Helper()
	for range 2 {
		_, err := l.Write(RecordBatch, []byte("after the failure"))
		if err == nil || !errors.Is(err, vfs.ErrInjected) || err.Error() != first.Error() {
			t.Fatalf("Write after failure = %v, want the first failure %v", err, first)
		}
	}
	if _, err := l.Rotate(); err == nil || err.Error() != first.Error() {
		t.Fatalf("Rotate after failure = %v, want %v", err, first)
	}
	if err := l.Close(); err == nil || !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Close after failure = %v, want the failure", err)
	}
}

func TestWriteErrorIsSticky(t *testing.T) {
	inj := &vfs.OnIndex{N: 4, Match: onOp(vfs.OpWrite)}
	dir := t.TempDir()
	fs := vfs.Inject(vfs.Default, inj.Injector())
	l := mustOpen(t, dir, Options{FS: fs})
	want, _ := writeN(t, l, 0, 3)
	_, err := l.Append(RecordBatch, []byte("fails"))
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("append = %v, want the injected error", err)
	}
	checkSticky(t, l, err)
	if inj.Count() != 5 {
		t.Errorf("%d writes reached the FS; nothing may be written after a failure", inj.Count())
	}
	got, res, err := replayAll(t, nil, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	equalRecs(t, got, want)
	if res.Truncated {
		t.Errorf("nothing was written, yet replay truncated: %+v", res)
	}
}

func TestShortWriteIsSticky(t *testing.T) {
	var writes atomic.Int64
	fs := vfs.Inject(vfs.Default, func(op vfs.Op, name string) error {
		if op == vfs.OpWrite && writes.Add(1) == 4 { // header, 2 records, then torn
			return vfs.ShortWrite{Err: vfs.ErrInjected}
		}
		return nil
	})
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{FS: fs})
	want, poss := writeN(t, l, 0, 2)
	_, err := l.Append(RecordBatch, payloadFor(50))
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("append = %v, want the injected error", err)
	}
	checkSticky(t, l, err)
	if writes.Load() != 4 {
		t.Errorf("%d writes reached the FS; nothing may be written after a partial record", writes.Load())
	}
	// Half a record is on disk: replay drops it as a torn tail.
	got, res, err := replayAll(t, nil, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	equalRecs(t, got, want)
	if !res.Truncated || res.TruncatedOffset != poss[1].Offset {
		t.Errorf("result %+v, want the half record at %d truncated", res, poss[1].Offset)
	}
}

func TestSyncErrorIsSticky(t *testing.T) {
	// Sync 0 is Open's header fsync, 1 the first Append's, 2 fails.
	inj := &vfs.OnIndex{N: 2, Match: onOp(vfs.OpSync)}
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{FS: vfs.Inject(vfs.Default, inj.Injector())})
	want, poss := writeN(t, l, 0, 1)
	p := payloadFor(1)
	_, err := l.Append(RecordDelete, p)
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("append = %v, want the injected error", err)
	}
	// A position synced before the failure is still durable.
	if err := l.SyncTo(poss[0]); err != nil {
		t.Errorf("SyncTo of a position synced before the failure: %v", err)
	}
	checkSticky(t, l, err)
	// The record whose fsync failed was written; earlier ones are intact.
	got, _, err := replayAll(t, nil, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	equalRecs(t, got, append(want, rec{file: poss[0].File, typ: RecordDelete, payload: p}))
}

// Under SyncNever the fsync of a roll is the only one: it fails the write
// that rolled.
func TestRollSyncErrorIsSticky(t *testing.T) {
	inj := &vfs.OnIndex{N: 1, Match: onOp(vfs.OpSync)}
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{FS: vfs.Inject(vfs.Default, inj.Injector()), Sync: SyncNever, SegmentBytes: fileHeaderSize + 1})
	want, _ := writeN(t, l, 0, 1)
	_, err := l.Write(RecordBatch, []byte("rolls"))
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("write = %v, want the injected error", err)
	}
	checkSticky(t, l, err)
	got, _, err := replayAll(t, nil, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	equalRecs(t, got, want)
}

func TestOpenErrors(t *testing.T) {
	for _, op := range []vfs.Op{vfs.OpMkdir, vfs.OpReadDir, vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir} {
		inj := &vfs.OnIndex{N: 0, Match: func(o vfs.Op, _ string) bool { return o == op }}
		l, err := Open(t.TempDir(), Options{FS: vfs.Inject(vfs.Default, inj.Injector())})
		if !errors.Is(err, vfs.ErrInjected) {
			if l != nil {
				l.Close()
			}
			t.Errorf("Open with failing %v = %v, want the injected error", op, err)
		}
	}
}

// TestErrorAtEveryOp fails the i-th filesystem operation of a workload, for
// every i until the workload runs clean, and checks after each run that
// replay succeeds and returns every acknowledged record, in order, followed
// by at most the one record whose write or fsync failed.
func TestErrorAtEveryOp(t *testing.T) {
	for i := int64(0); ; i++ {
		inj := &vfs.OnIndex{N: i}
		dir := t.TempDir()
		fs := vfs.Inject(vfs.Default, inj.Injector())
		var acked []rec
		var pending *rec
		failed := false
		func() {
			l, err := Open(dir, Options{FS: fs, SegmentBytes: 100})
			if err != nil {
				failed = true
				return
			}
			defer func() {
				if err := l.Close(); err != nil {
					failed = true
				}
			}()
			for j := range 8 {
				if j == 5 {
					if _, err := l.Rotate(); err != nil {
						failed = true
						return
					}
				}
				p := payloadFor(j)
				pos, err := l.Append(RecordBatch, p)
				if err != nil {
					failed = true
					pending = &rec{typ: RecordBatch, payload: p}
					return
				}
				acked = append(acked, rec{file: pos.File, typ: RecordBatch, payload: p})
			}
		}()
		got, _, err := replayAll(t, nil, dir, 1)
		if err != nil {
			t.Fatalf("error at op %d: replay: %v", i, err)
		}
		if len(got) < len(acked) || len(got) > len(acked)+1 {
			t.Fatalf("error at op %d: replayed %d records, %d acknowledged", i, len(got), len(acked))
		}
		equalRecs(t, got[:len(acked)], acked)
		if len(got) > len(acked) && (pending == nil || string(got[len(acked)].payload) != string(pending.payload)) {
			t.Fatalf("error at op %d: replay returned a record that was never written", i)
		}
		if !failed {
			if len(acked) != 8 {
				t.Fatalf("clean run acknowledged %d records", len(acked))
			}
			if i < 20 {
				t.Fatalf("workload ran clean at op %d: the injector never fired", i)
			}
			return
		}
	}
}
