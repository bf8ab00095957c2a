package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// Cancellation tests: a call cancelled partway through one long series
// must stop within one block of work and say so. Work is counted in
// blocks decoded (the testOnBlockDecode hook), never timed.

const (
	cancelSamples = 40_000 // one series
	cancelBlock   = 100    // samples per block: 400 blocks
	cancelAt      = 10     // blocks decoded before the cancel
)

// expiringCtx is a context whose deadline passes when expire is called,
// so that a test can let it expire at an exact point of the work.
type expiringCtx struct {
	context.Context
	expired atomic.Bool
}

func (c *expiringCtx) expire() { c.expired.Store(true) }

func (c *expiringCtx) Err() error {
	if c.expired.Load() {
		return context.DeadlineExceeded
	}
	return nil
}

// longSeriesDB returns a DB holding one float series of cancelSamples
// samples at times 0.., in one segment of cancelBlock-sample blocks.
// withParts makes db read long series in parts and windows of n samples.
func withParts(db *DB, n int) *DB {
	db.partSamples = n
	return db
}

func longSeriesDB(t *testing.T) *DB {
	t.Helper()
	db := memSeriesDB(t)
	mustFlush(t, db)
	return db
}

// memSeriesDB is longSeriesDB with the series in the memtable.
func memSeriesDB(t *testing.T) *DB {
	t.Helper()
	opts := quietOptions()
	opts.BlockSamples = cancelBlock
	opts.DisableBackgroundCompaction = true
	db := openDB(t, t.TempDir(), opts)
	tags := []Tag{{Key: "host", Value: "a"}}
	batch := make([]Point, 0, 10_000)
	for i := range cancelSamples {
		batch = append(batch, pt("m", tags, "v", Float(float64(i)/8), int64(i)))
		if len(batch) == cap(batch) {
			mustWrite(t, db, batch...)
			batch = batch[:0]
		}
	}
	return db
}

// blockCounter counts the blocks db decodes and, at the cancelAt-th,
// cancels: cancel runs once, on the goroutine decoding that block.
type blockCounter struct {
	n, atCancel atomic.Int64
}

func (c *blockCounter) install(db *DB, cancel func()) {
	c.n.Store(0)
	c.atCancel.Store(0)
	db.testOnBlockDecode = func() {
		if n := c.n.Add(1); n == cancelAt {
			c.atCancel.Store(n)
			cancel()
		}
	}
}

// check asserts that the call returned want and decoded no block after the
// cancel.
func (c *blockCounter) check(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v (after %d blocks)", err, want, c.n.Load())
	}
	if c.atCancel.Load() == 0 {
		t.Fatalf("the call decoded only %d blocks and never reached the cancel", c.n.Load())
	}
	if late := c.n.Load() - c.atCancel.Load(); late != 0 {
		t.Errorf("%d blocks decoded after the cancel, want 0", late)
	}
}

// cancellers are the two ways a call's context ends partway: cancel() and
// a deadline that passes.
var cancellers = []struct {
	name string
	want error
	ctx  func() (context.Context, func())
}{
	{"cancel", context.Canceled, func() (context.Context, func()) {
		return context.WithCancel(context.Background())
	}},
	{"deadline", context.DeadlineExceeded, func() (context.Context, func()) {
		c := &expiringCtx{Context: context.Background()}
		return c, c.expire
	}},
}

// TestCancelQuerySeqWithinSeries cancels a QuerySeq over one long series
// after a few parts: no part may follow the cancel, and the last element
// is the context's error, so the caller can tell a cut result from a whole.
func TestCancelQuerySeqWithinSeries(t *testing.T) {
	t.Run("segment", func(t *testing.T) { testCancelQuerySeq(t, withParts(longSeriesDB(t), 1000)) })
	t.Run("memtable", func(t *testing.T) { testCancelQuerySeq(t, withParts(memSeriesDB(t), 1000)) })
}

func testCancelQuerySeq(t *testing.T, db *DB) {

	// Uncancelled: the whole series, in many parts, no error.
	parts, n := 0, 0
	for s, err := range db.QuerySeq(context.Background(), rawAll("m")) {
		if err != nil {
			t.Fatal(err)
		}
		parts++
		n += len(s.Samples)
	}
	if n != cancelSamples || parts < 20 {
		t.Fatalf("uncancelled: %d samples in %d parts, want %d in >= 20", n, parts, cancelSamples)
	}

	for _, c := range cancellers {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := c.ctx()
			var blocks atomic.Int64
			db.testOnBlockDecode = func() { blocks.Add(1) }
			defer func() { db.testOnBlockDecode = nil }()
			parts, late, atCancel := 0, 0, int64(-1)
			var last error
			for s, err := range db.QuerySeq(ctx, rawAll("m")) {
				if err != nil {
					last = err
					continue
				}
				if len(s.Samples) == 0 {
					t.Fatal("empty part")
				}
				parts++
				if atCancel >= 0 {
					late++
				}
				if parts == 3 {
					cancel()
					atCancel = blocks.Load()
				}
			}
			if !errors.Is(last, c.want) {
				t.Fatalf("QuerySeq ended with %v, want %v", last, c.want)
			}
			if late != 0 {
				t.Errorf("%d parts yielded after the cancel, want 0", late)
			}
			if d := blocks.Load() - atCancel; d != 0 {
				t.Errorf("%d blocks decoded after the cancel, want 0", d)
			}
		})
	}
}

// TestCancelQueryWithinSeries cancels Query, raw and aggregated (each read
// path: whole series, windows, block stats), and Verify while they decode
// the blocks of one long series.
func TestCancelQueryWithinSeries(t *testing.T) {
	db := longSeriesDB(t)
	defer func() { db.testOnBlockDecode = nil }()
	query := func(agg Aggregate, every int64) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			q := rawAll("m")
			q.Agg, q.Every = agg, every
			res, err := db.Query(ctx, q)
			if err != nil && res != nil {
				return fmt.Errorf("a result beside the error: %d series", len(res))
			}
			return err
		}
	}
	calls := []struct {
		name string
		f    func(ctx context.Context) error
	}{
		{"raw", query(AggNone, 0)},
		{"first", query(AggFirst, 0)},
		{"sum-every", query(AggSum, 7)}, // buckets narrower than blocks: every block is decoded
		{"max-every", query(AggMax, 50)},
		{"verify", func(ctx context.Context) error { _, err := db.Verify(ctx); return err }},
	}
	for _, call := range calls {
		// The call decodes more than cancelAt blocks when left alone.
		var c blockCounter
		c.install(db, func() {})
		if err := call.f(context.Background()); err != nil {
			t.Fatalf("%s: %v", call.name, err)
		}
		if c.n.Load() <= cancelAt {
			t.Fatalf("%s decodes %d blocks uncancelled, the test needs more than %d", call.name, c.n.Load(), cancelAt)
		}
		for _, cn := range cancellers {
			t.Run(call.name+"/"+cn.name, func(t *testing.T) {
				ctx, cancel := cn.ctx()
				var c blockCounter
				c.install(db, cancel)
				c.check(t, call.f(ctx), cn.want)
			})
		}
	}
}

// TestCancelMetadataAndLast cancels the metadata calls and Last while
// they look for a visible sample through the blocks of one long series
// whose samples are all deleted but one in the middle, so that block time
// ranges do not decide and blocks are decoded.
func TestCancelMetadataAndLast(t *testing.T) {
	db := longSeriesDB(t)
	defer func() { db.testOnBlockDecode = nil }()
	const mid = cancelSamples / 2
	mustDelete(t, db, Selector{Measurement: "m", Start: 0, End: mid})
	mustDelete(t, db, Selector{Measurement: "m", Start: mid + 1, End: cancelSamples})

	calls := []struct {
		name string
		f    func(ctx context.Context) (any, error)
		want string // uncancelled result
	}{
		{"Measurements", func(ctx context.Context) (any, error) { return orNil(db.Measurements(ctx)) }, "[m]"},
		{"TagKeys", func(ctx context.Context) (any, error) { return orNil(db.TagKeys(ctx, Selector{Measurement: "m"})) }, "[host]"},
		{"TagValues", func(ctx context.Context) (any, error) { return orNil(db.TagValues(ctx, "host", Selector{})) }, "[a]"},
		{"SeriesInfo", func(ctx context.Context) (any, error) {
			res, err := db.SeriesInfo(ctx, Selector{Measurement: "m"})
			if len(res) == 0 {
				return nil, err
			}
			return len(res), err
		}, "1"},
		{"Last", func(ctx context.Context) (any, error) {
			res, err := db.Last(ctx, Selector{Measurement: "m"})
			if len(res) == 0 {
				return nil, err
			}
			return samplesOf(t, res), err
		}, fmt.Sprint([]Sample{{Time: mid, Value: Float(mid / 8)}})},
	}
	for _, call := range calls {
		var c blockCounter
		c.install(db, func() {})
		got, err := call.f(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", call.name, err)
		}
		if fmt.Sprint(got) != call.want {
			t.Fatalf("%s = %v, want %s", call.name, got, call.want)
		}
		if c.n.Load() <= cancelAt {
			t.Fatalf("%s decodes %d blocks uncancelled, the test needs more than %d", call.name, c.n.Load(), cancelAt)
		}
		for _, cn := range cancellers {
			t.Run(call.name+"/"+cn.name, func(t *testing.T) {
				ctx, cancel := cn.ctx()
				var c blockCounter
				c.install(db, cancel)
				got, err := call.f(ctx)
				c.check(t, err, cn.want)
				if got != nil {
					t.Errorf("a result beside the error: %v", got)
				}
			})
		}
	}
}

// orNil returns v as an any that is nil when v is empty.
func orNil(v []string, err error) (any, error) {
	if len(v) == 0 {
		return nil, err
	}
	return v, err
}

// TestCancelDelete checks that a Delete whose context has ended deletes
// nothing and says why.
func TestCancelDelete(t *testing.T) {
	db := longSeriesDB(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, stop := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer stop()
	sel := Selector{Measurement: "m"}
	for ctx, want := range map[context.Context]error{cancelled: context.Canceled, expired: context.DeadlineExceeded} {
		if err := db.Delete(ctx, sel); !errors.Is(err, want) {
			t.Fatalf("Delete = %v, want %v", err, want)
		}
	}
	if n := len(samplesOf(t, mustQuery(t, db, rawAll("m")))); n != cancelSamples {
		t.Fatalf("%d samples left, want %d: a cancelled Delete deleted", n, cancelSamples)
	}
	if st := db.Stats(); st.Tombstones != 0 || st.Deletes != 0 {
		t.Fatalf("a cancelled Delete left %d tombstones, counted %d deletes", st.Tombstones, st.Deletes)
	}
}

// TestCloseStopsCompaction closes the DB while a compaction merges one
// long series (user Compact and background compaction): the merge must
// stop within a block, Compact must say the DB closed, and the database
// must reopen whole.
func TestCloseStopsCompaction(t *testing.T) {
	for _, background := range []bool{false, true} {
		t.Run(fmt.Sprintf("background=%v", background), func(t *testing.T) {
			dir := t.TempDir()
			opts := quietOptions()
			opts.BlockSamples = cancelBlock
			opts.DisableBackgroundCompaction = !background
			opts.L0CompactionTrigger = 2
			db := openDB(t, dir, opts)
			// Two L0 segments whose samples interleave: the merge decodes
			// every block.
			tags := []Tag{{Key: "host", Value: "a"}}
			for half := range 2 {
				var batch []Point
				for i := half; i < cancelSamples; i += 2 {
					batch = append(batch, pt("m", tags, "v", Float(float64(i)), int64(i)))
				}
				mustWrite(t, db, batch...)
				if half == 0 || !background {
					mustFlush(t, db)
				}
			}

			// After a few polls of the merge's context, close the DB from
			// another goroutine and wait until Close has cancelled it; then
			// count the polls that follow.
			closed := make(chan error, 1)
			var polls, atClose atomic.Int64
			db.testCompactionContext = func(ctx context.Context) context.Context {
				return &pollCtx{Context: ctx, poll: func() {
					if polls.Add(1) == 20 {
						go func() { closed <- db.Close() }()
						<-ctx.Done()
						atClose.Store(polls.Load())
					}
				}}
			}
			if background {
				mustFlush(t, db) // the second L0 segment wakes the compactor
				// Compact waits for the background compaction (or, should
				// it win the race, runs the merge itself); either way the
				// DB closes under it. Without the close it would return nil.
				if err := db.Compact(); !errors.Is(err, ErrClosed) {
					t.Fatalf("Compact after the background compaction = %v, want ErrClosed", err)
				}
			} else if err := db.Compact(); !errors.Is(err, ErrClosed) || !errors.Is(err, context.Canceled) {
				t.Fatalf("Compact during Close = %v, want ErrClosed and context.Canceled", err)
			}
			if err := <-closed; err != nil {
				t.Fatalf("Close: %v", err)
			}
			if atClose.Load() == 0 {
				t.Fatalf("the merge polled its context %d times and never reached the close", polls.Load())
			}
			// The poll that sees the cancel stops the merge.
			if late := polls.Load() - atClose.Load(); late > 1 {
				t.Errorf("the merge polled %d more times after Close cancelled it, want at most 1", late)
			}

			opts.DisableBackgroundCompaction = true
			db = openDB(t, dir, opts)
			if n := len(samplesOf(t, mustQuery(t, db, rawAll("m")))); n != cancelSamples {
				t.Fatalf("reopened: %d samples, want %d", n, cancelSamples)
			}
			if _, err := db.Verify(context.Background()); err != nil {
				t.Fatalf("verify: %v", err)
			}
			if st := db.Stats(); st.SegmentsPerLevel[0] != 2 {
				t.Errorf("reopened with %v segments per level, want the two L0 inputs", st.SegmentsPerLevel)
			}
		})
	}
}

// pollCtx calls poll on every Err, then answers as its parent does.
type pollCtx struct {
	context.Context
	poll func()
}

func (c *pollCtx) Err() error {
	c.poll()
	return c.Context.Err()
}

// TestCancelQueryMemtable cancels Query over one long series held in the
// memtable, where no block is decoded: the read goes window by window
// (about PartSamples samples each) and polls its context between them.
func TestCancelQueryMemtable(t *testing.T) {
	db := withParts(memSeriesDB(t), 1000)
	for _, agg := range []Aggregate{AggNone, AggSum} {
		q := rawAll("m")
		q.Agg = agg
		// Uncancelled, the read polls once per window.
		var polls atomic.Int64
		ctx := &pollCtx{Context: context.Background(), poll: func() { polls.Add(1) }}
		if _, err := db.Query(ctx, q); err != nil {
			t.Fatal(err)
		}
		if windows := int64(cancelSamples / db.partSamples); polls.Load() < windows {
			t.Fatalf("%v: %d polls for %d windows", agg, polls.Load(), windows)
		}
		// Cancelled at the fifth poll: the next one stops it.
		cctx, cancel := context.WithCancel(context.Background())
		polls.Store(0)
		ctx = &pollCtx{Context: cctx, poll: func() {
			if polls.Add(1) == 5 {
				cancel()
			}
		}}
		res, err := db.Query(ctx, q)
		if !errors.Is(err, context.Canceled) || res != nil {
			t.Fatalf("%v: Query = %d series, %v; want context.Canceled", agg, len(res), err)
		}
		if polls.Load() != 5 {
			t.Errorf("%v: %d polls after the cancel, want 0", agg, polls.Load()-5)
		}
	}
}

// TestCancelMetadataMemtable cancels the metadata calls and Last while they look
// for a visible sample of one long memtable series whose samples are all
// deleted but one in the middle (kept, masked, because a reader was live
// when the deletes ran): the memtable is read window by window, polling
// the context between windows.
func TestCancelMetadataMemtable(t *testing.T) {
	db := withParts(memSeriesDB(t), 1000)
	const mid = cancelSamples / 2
	snap, err := db.acquireSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	mustDelete(t, db, Selector{Measurement: "m", Start: 0, End: mid})
	mustDelete(t, db, Selector{Measurement: "m", Start: mid + 1, End: cancelSamples})
	db.releaseSnapshot(snap)

	calls := []struct {
		name string
		f    func(ctx context.Context) (any, error)
		want string
	}{
		{"Measurements", func(ctx context.Context) (any, error) { return orNil(db.Measurements(ctx)) }, "[m]"},
		{"TagKeys", func(ctx context.Context) (any, error) { return orNil(db.TagKeys(ctx, Selector{Measurement: "m"})) }, "[host]"},
		{"TagValues", func(ctx context.Context) (any, error) { return orNil(db.TagValues(ctx, "host", Selector{})) }, "[a]"},
		{"SeriesInfo", func(ctx context.Context) (any, error) {
			res, err := db.SeriesInfo(ctx, Selector{Measurement: "m"})
			if len(res) == 0 {
				return nil, err
			}
			return len(res), err
		}, "1"},
		{"Last", func(ctx context.Context) (any, error) {
			res, err := db.Last(ctx, Selector{Measurement: "m"})
			if len(res) == 0 {
				return nil, err
			}
			return samplesOf(t, res), err
		}, fmt.Sprint([]Sample{{Time: mid, Value: Float(mid / 8)}})},
	}
	const cancelAtPoll = 6
	for _, call := range calls {
		var polls atomic.Int64
		got, err := call.f(&pollCtx{Context: context.Background(), poll: func() { polls.Add(1) }})
		if err != nil || fmt.Sprint(got) != call.want {
			t.Fatalf("%s = %v, %v; want %s", call.name, got, err, call.want)
		}
		// About one poll per window up to the visible sample.
		if polls.Load() < mid/int64(db.partSamples) {
			t.Fatalf("%s polled %d times reading %d samples in windows of %d", call.name, polls.Load(), mid, db.partSamples)
		}
		ctx, cancel := context.WithCancel(context.Background())
		polls.Store(0)
		got, err = call.f(&pollCtx{Context: ctx, poll: func() {
			if polls.Add(1) == cancelAtPoll {
				cancel()
			}
		}})
		cancel()
		if !errors.Is(err, context.Canceled) || got != nil {
			t.Fatalf("%s = %v, %v; want context.Canceled", call.name, got, err)
		}
		if late := polls.Load() - cancelAtPoll; late != 0 {
			t.Errorf("%s polled %d more times after the cancel", call.name, late)
		}
	}
}

// TestCancelWhileReadingAhead cancels QuerySeq and Scan while their
// workers, every slot taken, wait to claim the next chunk: the workers
// stop, and the loop must end with the context's error instead of
// waiting for a chunk that no worker will produce. The test hooks make
// the interleaving certain.
func TestCancelWhileReadingAhead(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // reading ahead needs two
	}
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	db := openDB(t, t.TempDir(), opts)
	const series = 40 * aggChunk
	pts := make([]Point, 0, series)
	for s := range series {
		pts = append(pts, pt("m", []Tag{{Key: "s", Value: fmt.Sprintf("%05d", s)}}, "v", Float(1), 10))
	}
	mustWrite(t, db, pts...)
	mustFlush(t, db)
	db.seqParallelMin = 1
	workers := min(runtime.GOMAXPROCS(0), aggMaxWorkers)
	sel := Selector{Measurement: "m"}
	for name, loop := range map[string]func(ctx context.Context, body func(error)){
		"QuerySeq": func(ctx context.Context, body func(error)) {
			for _, err := range db.QuerySeq(ctx, Query{Selector: sel}) {
				body(err)
			}
		},
		"Scan": func(ctx context.Context, body func(error)) {
			for _, err := range db.Scan(ctx, sel) {
				body(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			produced := make(chan bool, 2*series)
			db.testInOrder = func(p bool) { produced <- p }
			defer func() { db.testInOrder = nil }()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				first, last := true, error(nil)
				loop(ctx, func(err error) {
					if err != nil {
						last = err
						return
					}
					if !first {
						return
					}
					first = false
					// The first chunk and one per slot are produced;
					// then every worker waits for a slot.
					for n := 0; n < 1+2*workers; {
						if <-produced {
							n++
						}
					}
					cancel()
					for n := 0; n < workers; {
						if !<-produced {
							n++
						}
					}
				})
				done <- last
			}()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("%s after a cancel: %v, want context.Canceled", name, err)
				}
			case <-time.After(time.Minute): // a watchdog, not a wait: a pass ends at once
				buf := make([]byte, 1<<20)
				t.Fatalf("%s still running a minute after its context was cancelled:\n%s", name, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}
