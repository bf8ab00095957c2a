package engine

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/internal/vfs"
)

// resolver is a recorder that also records FeedResolve calls.
type resolver struct {
	recorder
	rmu      sync.Mutex
	resolved map[uint64]bool
}

func (r *resolver) FeedResolve(seq uint64, kept bool) {
	r.rmu.Lock()
	defer r.rmu.Unlock()
	if _, dup := r.resolved[seq]; dup {
		r.t.Errorf("FeedResolve(%d) twice", seq)
	}
	r.resolved[seq] = kept
}

// A logged batch whose WAL fsync fails is resolved as not kept: the write
// returns an error and the database does not hold it, so a subscriber that
// passes batches on must not. Every logged batch is resolved once, after
// its commit; a batch that was never logged is not resolved.
func TestFeedResolveFailedSync(t *testing.T) {
	dir := t.TempDir()
	var failSync atomic.Bool
	opts := quietOptions()
	opts.Sync = SyncAlways
	opts.fs = vfs.Inject(vfs.Default, func(op vfs.Op, name string) error {
		if op == vfs.OpSync && failSync.Load() && strings.HasPrefix(name, filepath.Join(dir, walDirName)) {
			return vfs.ErrInjected
		}
		return nil
	})
	db := openDB(t, dir, opts)
	r := &resolver{recorder: recorder{t: t}, resolved: map[uint64]bool{}}
	if _, err := db.Subscribe(r); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, db, pt("m", nil, "v", Int(1), 1))
	failSync.Store(true)
	if err := db.Write([]Point{pt("m", nil, "v", Int(2), 2)}); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("write with a failing fsync: %v", err)
	}
	// The WAL refuses writes from now on: not logged, not resolved.
	if err := db.Write([]Point{pt("m", nil, "v", Int(3), 3)}); err == nil {
		t.Fatal("write after a failed fsync succeeded")
	}
	r.mu.Lock()
	logged, failed := len(r.logged), len(r.failed)
	r.mu.Unlock()
	r.rmu.Lock()
	defer r.rmu.Unlock()
	if logged != 2 || failed != 1 {
		t.Fatalf("logged %d failed %d, want 2 and 1", logged, failed)
	}
	want := map[uint64]bool{1: true, 2: false}
	if len(r.resolved) != len(want) || r.resolved[1] != true || r.resolved[2] != false {
		t.Fatalf("resolved %v, want %v", r.resolved, want)
	}
	if got := samplesOf(t, mustQuery(t, db, rawAll("m"))); len(got) != 1 {
		t.Fatalf("database holds %v, want only the first write", got)
	}
}
