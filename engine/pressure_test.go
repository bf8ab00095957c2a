package engine

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stratadb/strata/memtable"
)

// writePressure stalls writes on a full flush queue or a full L0, slows
// them only when the next seal would stall them or L0 is deep, and leaves
// them alone while one flush runs with room in the active memtable.
func TestWritePressure(t *testing.T) {
	o := &Options{MaxImmutableMemTables: 2, L0CompactionTrigger: 4, L0StopWritesTrigger: 12, MemTableBytes: 1000}
	for _, c := range []struct {
		nimm, nl0 int
		active    int64
		want      pressure
	}{
		{0, 0, 0, pressureNone},
		{0, 0, 999, pressureNone},    // nothing queued: the seal would not stall
		{1, 0, 100, pressureNone},    // a flush runs, the next seal is far
		{1, 0, 749, pressureNone},    // just under three quarters
		{1, 0, 750, pressureSlow},    // the next seal would fill the queue
		{1, 7, 0, pressureNone},      // L0 just under half way
		{0, 8, 0, pressureSlow},      // L0 half way from trigger (4) to stop (12)
		{2, 0, 0, pressureStall},     // the queue is full
		{0, 12, 0, pressureStall},    // L0 at its stop
		{2, 12, 1000, pressureStall}, // both
		{1, 11, 1000, pressureSlow},  // near both, at neither
	} {
		if got := writePressure(o, c.nimm, c.nl0, c.active); got != c.want {
			t.Errorf("nimm %d, nl0 %d, active %d: %v, want %v", c.nimm, c.nl0, c.active, got, c.want)
		}
	}
	// With a queue of three, one queued is not yet near a stall.
	o.MaxImmutableMemTables = 3
	if got := writePressure(o, 1, 0, 1000); got != pressureNone {
		t.Errorf("one of three queued: %v", got)
	}
	if got := writePressure(o, 2, 0, 1000); got != pressureSlow {
		t.Errorf("two of three queued, active full: %v", got)
	}
}

// A compaction pauses while writers are stalled on the flush queue, and
// goes on once they are released, once L0 is deep enough that compacting
// it is what releases them, once its context is cancelled, or once the
// database closes.
func TestCompactionYieldsToStalledFlush(t *testing.T) {
	// No background compaction: the test swaps the current version for
	// one with a deep L0 below, which nothing else may read meanwhile.
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	db := openDB(t, t.TempDir(), opts)
	stall := func(n int) {
		db.mu.Lock()
		db.mu.flushStalls = n
		db.mu.cond.Broadcast()
		db.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// yielding runs yieldToFlush and returns a channel closed when it
	// returns, after waiting until it paused or returned.
	yielding := func(wantPause bool) chan struct{} {
		t.Helper()
		before := db.st.compactionYields.Load()
		done := make(chan struct{})
		go func() { db.yieldToFlush(ctx); close(done) }()
		if !wantPause {
			<-done
			if db.st.compactionYields.Load() != before {
				t.Fatal("paused though it should not have")
			}
			return done
		}
		deadline := time.Now().Add(10 * time.Second)
		for db.st.compactionYields.Load() == before {
			if time.Now().After(deadline) {
				t.Fatal("did not pause while writers were stalled on a flush")
			}
			runtime.Gosched()
		}
		select {
		case <-done:
			t.Fatal("returned while writers were stalled on a flush")
		default:
		}
		return done
	}

	yielding(false) // no writer stalled

	stall(1)
	done := yielding(true)
	stall(0) // the flush ended: the writers go on
	<-done

	// L0 deep enough to slow writes: compacting it is what releases them.
	stall(1)
	db.mu.Lock()
	saved := db.mu.v
	deep := &version{}
	deep.Levels[0] = make([]*segHandle, (db.opts.L0CompactionTrigger+db.opts.L0StopWritesTrigger)/2)
	db.mu.v = deep
	db.mu.Unlock()
	yielding(false)
	db.mu.Lock()
	db.mu.v = saved
	db.mu.Unlock()

	// Cancelling the compaction's context releases it.
	done = yielding(true)
	cancel()
	<-done
	ctx = context.Background()

	// Closing releases a paused compaction.
	done = yielding(true)
	db.mu.Lock()
	db.mu.closing = true
	db.mu.cond.Broadcast()
	db.mu.Unlock()
	<-done
	db.mu.Lock()
	db.mu.closing = false
	db.mu.flushStalls = 0
	db.mu.Unlock()
}

func (p pressure) String() string {
	return [...]string{"none", "slow", "stall"}[p]
}

// A compaction paused for a stalled writer resumes once the flush ends,
// whichever of the two the flush's wakeup runs first: when the compaction
// runs first it still sees the stall counted and waits again, and the
// writer that then leaves must wake it. One P makes that order the
// likely one.
func TestCompactionResumesAfterStall(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	opts.MaxImmutableMemTables = 1
	db := openDB(t, t.TempDir(), opts)
	db.versionMu.Lock() // holds the flush before its manifest edit
	sealed := &memRef{t: memtable.New(), walEnd: db.wal.CurrentFile() + 1, sealed: true}
	db.mu.Lock()
	db.mu.imm = append(db.mu.imm, sealed)
	db.mu.cond.Broadcast()
	db.mu.Unlock()

	writer := make(chan error, 1)
	go func() { writer <- db.throttle() }()
	for {
		db.mu.Lock()
		n := db.mu.flushStalls
		db.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond) // polling interval, not synchronisation
	}
	resumed := make(chan struct{})
	go func() { db.yieldToFlush(context.Background()); close(resumed) }()
	for db.st.compactionYields.Load() == 0 {
		time.Sleep(time.Millisecond) // polling interval, not synchronisation
	}
	db.versionMu.Unlock() // the flush ends
	if err := <-writer; err != nil {
		t.Fatal(err)
	}
	select {
	case <-resumed:
	case <-time.After(10 * time.Second):
		db.mu.Lock()
		n := db.mu.flushStalls
		db.mu.cond.Broadcast()
		db.mu.Unlock()
		<-resumed
		t.Fatalf("the compaction stayed paused after the writer went on (flushStalls %d)", n)
	}
}
