package engine

import (
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/internal/testutil"
	"github.com/stratadb/strata/internal/vfs"
)

// TestCheckpointExcludesRefusedWrite pins down the race between a
// checkpoint and a Write whose WAL fsync fails. The checkpoint reads the
// last sequence number handed out (the write's, S) and rotates the WAL
// while the write's group-commit fsync is still running:
//
//  1. Write A logs record S and, as group-commit leader, enters its fsync
//     (holding the WAL's sync lock);
//  2. Checkpoint takes commitMu, reads S, and Rotate passes its check of
//     the WAL's sticky failure (none yet), then waits for the sync lock;
//  3. A's fsync fails: the failure is recorded, A's samples are dropped and
//     Write returns the error;
//  4. Rotate's roll gets the sync lock and fsyncs the file again, which
//     succeeds (as a second fsync after a failed one does on Linux).
//
// The roll ignored the failure recorded in 3, so the checkpoint succeeded
// with record S in its copy of the WAL: the refused write was visible in
// the checkpoint. Now the roll sees the failure and the checkpoint fails.
func TestCheckpointExcludesRefusedWrite(t *testing.T) {
	dir := t.TempDir()
	walDir := filepath.Join(dir, walDirName)
	var armed atomic.Bool
	entered := make(chan struct{})
	release := make(chan struct{})
	opts := quietOptions()
	opts.Sync = SyncAlways
	opts.DisableBackgroundCompaction = true
	opts.fs = vfs.Inject(vfs.Default, func(op vfs.Op, name string) error {
		// The next fsync of a WAL file blocks until released, then fails;
		// the fsyncs after it succeed.
		if op == vfs.OpSync && strings.HasPrefix(name, walDir) && armed.CompareAndSwap(true, false) {
			close(entered)
			<-release
			return vfs.ErrInjected
		}
		return nil
	})
	db := openDB(t, dir, opts)
	mustWrite(t, db, pt("m", nil, "v", Int(1), 1))

	armed.Store(true)
	writeErr := make(chan error, 1)
	go func() { writeErr <- db.Write([]Point{pt("m", nil, "v", Int(2), 2)}) }()
	<-entered // step 1

	type result struct {
		info CheckpointInfo
		err  error
	}
	cpDir := filepath.Join(t.TempDir(), "cp")
	cpDone := make(chan result, 1)
	go func() {
		info, err := db.Checkpoint(t.Context(), cpDir)
		cpDone <- result{info, err}
	}()
	// Step 2: the checkpoint is in the roll, past Rotate's check, once a
	// goroutine's stack shows it (the roll cannot finish: A holds the sync
	// lock).
	testutil.WaitForFrame(t, "wal.(*Log).roll(")
	close(release) // step 3
	if err := <-writeErr; !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Write with a failing fsync = %v, want the injected error", err)
	}
	res := <-cpDone // step 4
	if res.err != nil {
		if !errors.Is(res.err, vfs.ErrInjected) {
			t.Fatalf("checkpoint failed with %v, want the WAL's sticky failure", res.err)
		}
		return
	}
	// A checkpoint that succeeds must not hold the refused write.
	cp := openDB(t, cpDir, quietOptions())
	got := samplesOf(t, mustQuery(t, cp, rawAll("m")))
	if len(got) != 1 || got[0].Time != 1 {
		t.Fatalf("checkpoint (seq %d) holds %v, want only 1=1: a write whose Write failed is in it", res.info.Seq, got)
	}
}
