package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stratadb/strata/internal/vfs"
)

// flushOrderFixture opens a database whose first flush is held at the
// creation of its segment file until release is closed, and then fails
// with failFirst, or goes on. Two flushes may run at once whatever the
// machine's cores.
type flushOrderFixture struct {
	t       *testing.T
	dir     string
	db      *DB
	held    chan struct{} // closed when the first flush is held
	release chan struct{}
	once    sync.Once
	waiting bool // set under db.mu when a flush waits for its turn
}

func newFlushOrderFixture(t *testing.T, failFirst error) *flushOrderFixture {
	f := &flushOrderFixture{t: t, dir: t.TempDir(), held: make(chan struct{}),
		release: make(chan struct{})}
	var first sync.Once
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	opts.fs = vfs.Inject(vfs.Default, func(op vfs.Op, name string) error {
		if op != vfs.OpCreate || !strings.HasSuffix(name, segSuffix+".tmp") {
			return nil
		}
		isFirst := false
		first.Do(func() { isFirst = true })
		if !isFirst {
			return nil
		}
		close(f.held)
		<-f.release
		return failFirst
	})
	f.db = openDB(t, f.dir, opts)
	// Registered after openDB's Close: runs first, so that a failed test
	// does not leave Close waiting for the held flush.
	t.Cleanup(f.releaseOnce)
	// Called under db.mu: wake fillTwo once (awaitTurn's own wait wakes
	// too, and calls it again).
	f.db.testAwaitingTurn = func() {
		if !f.waiting {
			f.waiting = true
			f.db.mu.cond.Broadcast()
		}
	}
	f.db.mu.Lock()
	f.db.mu.flushLimit = 2
	f.db.mu.Unlock()
	return f
}

func (f *flushOrderFixture) releaseOnce() { f.once.Do(func() { close(f.release) }) }

// seal seals the active memtable, as a full one is, without waiting for
// its flush.
func (f *flushOrderFixture) seal() {
	f.t.Helper()
	f.db.commitMu.Lock()
	defer f.db.commitMu.Unlock()
	if err := f.db.sealLocked(true); err != nil {
		f.t.Fatalf("seal: %v", err)
	}
}

// published returns the L0 segments' file numbers and the sealed
// memtables not yet flushed.
func (f *flushOrderFixture) published() (l0 []uint64, imm int) {
	f.db.mu.Lock()
	defer f.db.mu.Unlock()
	for _, h := range f.db.mu.v.Levels[0] {
		l0 = append(l0, h.FileNum)
	}
	return l0, len(f.db.mu.imm)
}

// fillTwo writes point x = 1 and series a into one memtable and x = 2 and
// series b into the next, seals both, and returns once the younger's
// segment is written and its flush waits for the older's, which is held.
func (f *flushOrderFixture) fillTwo() {
	f.t.Helper()
	x := func(v float64) Point { return pt("m", []Tag{{Key: "k", Value: "x"}}, "f", Float(v), 10) }
	mustWrite(f.t, f.db, x(1), pt("m", []Tag{{Key: "k", Value: "a"}}, "f", Float(1), 20))
	f.seal()
	<-f.held
	mustWrite(f.t, f.db, x(2), pt("m", []Tag{{Key: "k", Value: "b"}}, "f", Float(2), 30))
	f.seal()
	// Until the younger flush waits for its turn, or is published.
	f.db.mu.Lock()
	for !f.waiting && len(f.db.mu.v.Levels[0]) == 0 && len(f.db.mu.imm) == 2 {
		f.db.mu.cond.Wait()
	}
	f.db.mu.Unlock()
	if l0, imm := f.published(); len(l0) != 0 || imm != 2 {
		f.t.Fatalf("with the older flush held, L0 holds %v and %d memtables wait: the younger was published first", l0, imm)
	}
}

// wantData checks the three series: x holds the younger write's value.
func wantData(t *testing.T, db *DB) {
	t.Helper()
	res := mustQuery(t, db, rawAll("m"))
	got := map[string]float64{}
	for _, s := range res {
		for _, smp := range s.Samples {
			got[s.Tags[0].Value] = smp.Value.Float()
		}
		if len(s.Samples) != 1 {
			t.Errorf("series %v: %d samples, want 1", s.Tags, len(s.Samples))
		}
	}
	want := map[string]float64{"x": 2, "a": 1, "b": 2}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("series k=%s: %v, want %v", k, got[k], v)
		}
	}
}

// Two sealed memtables flush at once. The younger's segment is written
// first, yet it is published only after the older's: L0 stays in the
// order of sealing, so the newer value of a point written to both wins,
// before and after a reopen.
func TestConcurrentFlushesPublishInOrder(t *testing.T) {
	f := newFlushOrderFixture(t, nil)
	f.fillTwo()
	f.releaseOnce()
	mustFlush(t, f.db)
	l0, imm := f.published()
	if len(l0) != 2 || imm != 0 || l0[0] >= l0[1] {
		t.Fatalf("after both flushes: L0 %v, %d memtables waiting; want two segments, oldest first", l0, imm)
	}
	wantData(t, f.db)
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, f.dir, quietOptions())
	wantData(t, db)
	// Both segments, and nothing else, are on disk.
	segs, _ := filepath.Glob(filepath.Join(f.dir, "*"+segSuffix))
	if len(segs) != 2 {
		t.Errorf("segment files %v, want 2", segs)
	}
}

// When the older flush fails, the younger one, though written, is not
// published: writes stop with the error, and a reopen recovers every
// acknowledged point from the WAL and removes the unpublished segment.
func TestConcurrentFlushFailureStopsYounger(t *testing.T) {
	f := newFlushOrderFixture(t, vfs.ErrInjected)
	f.fillTwo()
	f.releaseOnce()
	if err := f.db.Flush(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("flush after the older flush failed: %v, want the injected error", err)
	}
	if l0, imm := f.published(); len(l0) != 0 || imm != 2 {
		t.Fatalf("after the older flush failed: L0 %v, %d memtables waiting; want nothing published", l0, imm)
	}
	if err := f.db.Write([]Point{pt("m", []Tag{{Key: "k", Value: "c"}}, "f", Float(3), 40)}); err == nil {
		t.Fatal("a write succeeded after a flush failed")
	}
	if err := f.db.Close(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("close: %v, want the injected error", err)
	}
	db := openDB(t, f.dir, quietOptions())
	wantData(t, db)
	mustFlush(t, db)
	wantData(t, db)
	l0 := 0
	db.mu.Lock()
	live := map[string]bool{}
	for _, h := range db.mu.v.Levels[0] {
		live[segName(h.FileNum)] = true
		l0++
	}
	db.mu.Unlock()
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), segSuffix) && !live[e.Name()] {
			t.Errorf("segment %s is on disk but not live: the failed flush's younger segment was left behind", e.Name())
		}
	}
	if l0 != 1 {
		t.Errorf("L0 holds %d segments after the reopen's flush, want 1", l0)
	}
}

// A flush of a memtable that holds only a delete creates no segment, and
// the file number it was given is not left in the manifests' obsolete
// list: a loop of Delete and Flush does not grow them.
func TestEmptyFlushForgetsItsFileNumber(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	mustWrite(t, db, pt("m", []Tag{{Key: "k", Value: "x"}}, "f", Float(1), 10))
	mustFlush(t, db)
	for i := range 5 {
		mustDelete(t, db, Selector{Measurement: "m", Start: int64(i), End: int64(i + 1)})
		mustFlush(t, db)
	}
	db.mu.Lock()
	v := db.mu.v
	db.mu.Unlock()
	m, err := readManifest(db.fs, db.dir)
	if err != nil {
		t.Fatal(err)
	}
	if obs := db.files.Obsolete(v); len(obs) != 0 || len(m.Obsolete) != 0 {
		t.Fatalf("obsolete file numbers in memory %v, in the manifest %v; want none", obs, m.Obsolete)
	}
}

// A failure elsewhere (a compaction, say) while two flushes run stops
// writes but does not throw away segments already written: each flush
// still publishes once its turn comes, as a lone flush always did.
func TestFlushesPublishAfterUnrelatedFailure(t *testing.T) {
	f := newFlushOrderFixture(t, nil)
	f.fillTwo()
	failure := errors.New("compaction failed")
	f.db.mu.Lock()
	f.db.mu.bgErr = failure
	f.db.mu.cond.Broadcast()
	f.db.mu.Unlock()
	f.releaseOnce()
	f.db.mu.Lock()
	for f.db.mu.flushing > 0 {
		f.db.mu.cond.Wait()
	}
	f.db.mu.Unlock()
	if l0, imm := f.published(); len(l0) != 2 || imm != 0 {
		t.Fatalf("L0 %v, %d memtables waiting; want both flushes published", l0, imm)
	}
	if err := f.db.Close(); !errors.Is(err, failure) {
		t.Fatalf("close: %v, want the failure", err)
	}
	wantData(t, openDB(t, f.dir, quietOptions()))
}
