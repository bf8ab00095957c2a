package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestDifferential runs random writes (overwrites, out of order, negative
// times, every kind), deletes, flushes, compactions and reopens against the
// engine and a simple in-memory model, and compares raw queries and every
// aggregate with the model's answer after every few steps.
func TestDifferential(t *testing.T) {
	steps := 300
	if raceEnabled {
		steps = 200
	}
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			opts := &Options{
				Logger:       slog.New(slog.DiscardHandler),
				Sync:         SyncNever,
				BlockSamples: 16,
			}
			if seed == 1 {
				opts.Sync = SyncAlways
			}
			runDifferential(t, seed, steps, opts, false)
		})
	}
}

// TestDifferentialAggressive is TestDifferential with tiny memtables,
// blocks, segments and levels, background compaction on, and queries
// running in another goroutine during the steps.
func TestDifferentialAggressive(t *testing.T) {
	steps := 250
	if raceEnabled {
		steps = 150
	}
	for _, seed := range []uint64{11, 12} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			opts := &Options{
				Logger:              slog.New(slog.DiscardHandler),
				Sync:                SyncNever,
				MemTableBytes:       4 << 10,
				BlockSamples:        8,
				L0CompactionTrigger: 2,
				TargetSegmentBytes:  4 << 10,
				L1TargetBytes:       16 << 10,
				WALSegmentBytes:     8 << 10,
			}
			runDifferential(t, seed, steps, opts, true)
		})
	}
}

func runDifferential(t *testing.T, seed uint64, steps int, opts *Options, concurrentReads bool) {
	r := rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1))
	g := newGen(r)
	dir := t.TempDir()
	m := NewRefModel()
	ctx := context.Background()

	var cur atomic.Pointer[DB]
	db := openDB(t, dir, opts)
	cur.Store(db)

	// With concurrentReads, another goroutine runs a few queries per step
	// while the steps go on, and checks that each result is well formed.
	var tick chan struct{}
	if concurrentReads {
		tick = make(chan struct{}, 1)
		var wg sync.WaitGroup
		var queries atomic.Int64
		wg.Go(func() {
			rg := newGen(rand.New(rand.NewPCG(seed, 99)))
			for range tick {
				for range 3 {
					q := Query{Selector: rg.selector(), Agg: allAggs[rg.r.IntN(len(allAggs))]}
					if q.Agg != AggNone && rg.r.IntN(2) == 0 {
						q.Every = rg.every()
					}
					res, err := cur.Load().Query(ctx, q)
					if errors.Is(err, ErrClosed) {
						continue // between Close and Open of a reopen step
					}
					if err != nil {
						t.Errorf("concurrent query %s: %v", formatQuery(q), err)
						return
					}
					if d := wellFormed(q, res); d != "" {
						t.Errorf("concurrent query %s: %s", formatQuery(q), d)
						return
					}
					queries.Add(1)
				}
			}
		})
		defer func() {
			close(tick)
			wg.Wait()
			if queries.Load() == 0 {
				t.Errorf("no concurrent query completed")
			}
		}()
	}

	fullCheck := func(where string) {
		t.Helper()
		for _, meas := range genMeasurements {
			checkQuery(t, db, m, rawAll(meas), minTime, where)
		}
	}
	check := func(where string) {
		t.Helper()
		sel := g.selector()
		every := g.every()
		for _, agg := range allAggs {
			checkQuery(t, db, m, Query{Selector: sel, Agg: agg}, minTime, where)
			if agg != AggNone {
				checkQuery(t, db, m, Query{Selector: sel, Agg: agg, Every: every}, minTime, where)
			}
		}
	}

	var writes, conflicts, deletes int
	for step := range steps {
		where := fmt.Sprintf("seed %d step %d", seed, step)
		select {
		case tick <- struct{}{}: // a nil tick (no concurrent reads) never sends
		default:
		}
		switch x := r.IntN(100); {
		case x < 55:
			pts := g.batch()
			want := m.write(pts)
			err := db.Write(pts)
			if want < 0 {
				if err != nil {
					t.Fatalf("%s: write: %v", where, err)
				}
				writes++
				break
			}
			conflicts++
			var pe *PointError
			if !errors.Is(err, ErrFieldTypeConflict) || !errors.As(err, &pe) || pe.Index != want {
				t.Fatalf("%s: write with a kind conflict at point %d returned %v", where, want, err)
			}
		case x < 65:
			sel := g.selector()
			if err := db.Delete(ctx, sel); err != nil {
				t.Fatalf("%s: delete %+v: %v", where, sel, err)
			}
			m.Delete(sel)
			deletes++
		case x < 74:
			if err := db.Flush(); err != nil {
				t.Fatalf("%s: flush: %v", where, err)
			}
		case x < 79:
			if err := db.Compact(); err != nil {
				t.Fatalf("%s: compact: %v", where, err)
			}
		case x < 83:
			if err := db.Close(); err != nil {
				t.Fatalf("%s: close: %v", where, err)
			}
			db = openDB(t, dir, opts)
			cur.Store(db)
			fullCheck(where + " after reopen")
		default:
			check(where)
		}
		if step%25 == 24 {
			fullCheck(where)
		}
	}
	fullCheck("end")
	mustCompact(t, db)
	fullCheck("end, after compact")
	for range 10 {
		check("end, after compact")
	}
	db = reopen(t, db, dir, opts)
	cur.Store(db)
	fullCheck("end, after reopen")
	if writes == 0 || conflicts == 0 || deletes == 0 {
		t.Errorf("workload too narrow: %d writes, %d conflicts, %d deletes", writes, conflicts, deletes)
	}
	t.Logf("%d writes, %d conflicts, %d deletes, %d samples in the model; stats %+v",
		writes, conflicts, deletes, m.samples(), db.Stats())
}
