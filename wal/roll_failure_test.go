package wal

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/internal/testutil"
	"github.com/stratadb/strata/internal/vfs"
)

// TestRollAfterConcurrentSyncFailure: a roll (Rotate, or a Write past
// SegmentBytes) checks for a sticky failure before it waits for syncMu,
// which a group-commit leader holds through its fsync. When that fsync
// fails meanwhile, the roll must fail with it: it must not fsync the file
// again and mark the refused records durable, which made Rotate claim them
// (a checkpoint copied a refused write) and a later SyncTo acknowledge a
// record whose fsync had failed.
func TestRollAfterConcurrentSyncFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		roll func(l *Log) error
	}{
		{"Rotate", func(l *Log) error { _, err := l.Rotate(); return err }},
		{"Write", func(l *Log) error { _, err := l.Write(RecordBatch, []byte("c")); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var armed atomic.Bool
			entered := make(chan struct{})
			release := make(chan struct{})
			fs := vfs.Inject(vfs.Default, func(op vfs.Op, name string) error {
				// The next fsync blocks until released, then fails; the
				// ones after it succeed, as a second fsync after a failed
				// one may on Linux.
				if op == vfs.OpSync && armed.CompareAndSwap(true, false) {
					close(entered)
					<-release
					return vfs.ErrInjected
				}
				return nil
			})
			a, b := []byte("a"), []byte("b")
			// Records a and b fit in the first file; the next Write rolls.
			segBytes := int64(fileHeaderSize + len(appendRecord(nil, RecordBatch, a)) + len(appendRecord(nil, RecordBatch, b)))
			l := mustOpen(t, t.TempDir(), Options{FS: fs, SegmentBytes: segBytes})
			defer l.Close()
			posA, err := l.Write(RecordBatch, a)
			if err != nil {
				t.Fatal(err)
			}
			posB, err := l.Write(RecordBatch, b)
			if err != nil {
				t.Fatal(err)
			}
			if posB.File != posA.File {
				t.Fatalf("b rolled to file %d", posB.File)
			}

			armed.Store(true)
			leader := make(chan error, 1)
			go func() { leader <- l.SyncTo(posA) }()
			<-entered // the leader fsyncs a and b, holding syncMu
			rolled := make(chan error, 1)
			go func() { rolled <- tc.roll(l) }()
			testutil.WaitForFrame(t, "wal.(*Log).roll(") // past the caller's check, waiting for syncMu
			close(release)
			if err := <-leader; !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("SyncTo of the leader = %v, want the injected error", err)
			}
			if err := <-rolled; !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("%s after the failed fsync = %v, want the sticky failure", tc.name, err)
			}
			if err := l.SyncTo(posB); !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("SyncTo of a record the failed fsync covered = %v, want the sticky failure", err)
			}
		})
	}
}
