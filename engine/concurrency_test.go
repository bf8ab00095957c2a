package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentWritersReaders runs writers (each with its own series and
// all sharing one) and readers at once while small memtables force
// flushes and compactions. Readers check that every write acknowledged
// before their query is visible; afterwards every acknowledged point is
// present with the right value.
func TestConcurrentWritersReaders(t *testing.T) {
	const writers, readers = 4, 2
	batches, perBatch := 100, 20
	if raceEnabled {
		batches = 50
	}
	for _, mode := range []SyncMode{SyncAlways, SyncNever} {
		t.Run(mode.String(), func(t *testing.T) {
			opts := &Options{
				Logger:              slog.New(slog.DiscardHandler),
				Sync:                mode,
				MemTableBytes:       32 << 10,
				BlockSamples:        32,
				L0CompactionTrigger: 2,
				TargetSegmentBytes:  16 << 10,
				L1TargetBytes:       64 << 10,
			}
			runConcurrent(t, opts, writers, readers, batches, perBatch)
		})
	}
}

// concurrentValue is the value writer w writes at step i: distinct per
// writer and step, so a wrong or lost sample shows.
func concurrentValue(w, i int) float64 { return float64(w*1_000_000+i) + 0.25 }

func runConcurrent(t *testing.T, opts *Options, writers, readers, batches, perBatch int) {
	dir := t.TempDir()
	db := openDB(t, dir, opts)
	ctx := context.Background()
	acked := make([]atomic.Int64, writers) // samples of writer w's own series acknowledged
	var wg sync.WaitGroup
	var writing sync.WaitGroup
	var stop atomic.Bool
	for w := range writers {
		writing.Add(1)
		wg.Go(func() {
			defer writing.Done()
			tags := []Tag{{Key: "writer", Value: fmt.Sprint(w)}}
			for b := range batches {
				pts := make([]Point, 0, perBatch)
				for j := range perBatch {
					i := b*perBatch + j
					v := concurrentValue(w, i)
					pts = append(pts,
						// Own series: time i.
						Point{Measurement: "own", Tags: tags, Fields: []Field{{Key: "v", Value: Float(v)}, {Key: "n", Value: Int(int64(i))}}, Time: int64(i)},
						// Shared series: writers interleave their times.
						pt("shared", nil, "v", Float(v), int64(i*writers+w)))
				}
				if err := db.Write(pts); err != nil {
					t.Errorf("writer %d batch %d: %v", w, b, err)
					return
				}
				acked[w].Store(int64((b + 1) * perBatch))
			}
		})
	}
	var reads atomic.Int64
	for r := range readers {
		wg.Go(func() {
			// A bounded number of reads, so that readers do not starve
			// the writers of the two cores CI has.
			for k := 0; k < 200 && !stop.Load(); k++ {
				w := (k + r) % writers
				want := acked[w].Load()
				q := Query{Selector: Selector{Measurement: "own", Field: "v", Tags: []Tag{{Key: "writer", Value: fmt.Sprint(w)}},
					Start: minTime, End: maxTime}, Agg: AggCount}
				res, err := db.Query(ctx, q)
				if err != nil {
					t.Errorf("reader %d: %v", r, err)
					return
				}
				var got int64
				if len(res) == 1 && len(res[0].Samples) == 1 {
					got = res[0].Samples[0].Value.Int()
				}
				if got < want {
					t.Errorf("reader %d: writer %d had %d samples acknowledged, query counted %d", r, w, want, got)
					return
				}
				// The shared series around the newest acknowledged samples.
				recent := int64(writers) * want
				sq := Query{Selector: Selector{Measurement: "shared", Start: max(0, recent-500), End: recent + 500}}
				sres, err := db.Query(ctx, sq)
				if err != nil {
					t.Errorf("reader %d: %v", r, err)
					return
				}
				if d := wellFormed(sq, sres); d != "" {
					t.Errorf("reader %d: %s", r, d)
					return
				}
				reads.Add(1)
			}
		})
	}
	writing.Wait()
	stop.Store(true)
	wg.Wait()
	if t.Failed() {
		return
	}
	if reads.Load() == 0 {
		t.Fatal("no read completed")
	}
	check := func(where string) {
		t.Helper()
		n := batches * perBatch
		own := mustQuery(t, db, rawAll("own"))
		if len(own) != 2*writers {
			t.Fatalf("%s: %d own series, want %d", where, len(own), 2*writers)
		}
		for _, s := range own {
			var w int
			fmt.Sscan(s.Tags[0].Value, &w)
			if len(s.Samples) != n {
				t.Fatalf("%s: writer %d field %s: %d samples, want %d", where, w, s.Field, len(s.Samples), n)
			}
			for i, smp := range s.Samples {
				want := Float(concurrentValue(w, i))
				if s.Field == "n" {
					want = Int(int64(i))
				}
				if smp.Time != int64(i) || !smp.Value.Equal(want) {
					t.Fatalf("%s: writer %d field %s sample %d = %d:%v, want %d:%v", where, w, s.Field, i, smp.Time, smp.Value, i, want)
				}
			}
		}
		shared := samplesOf(t, mustQuery(t, db, rawAll("shared")))
		if len(shared) != n*writers {
			t.Fatalf("%s: shared series has %d samples, want %d", where, len(shared), n*writers)
		}
		for k, smp := range shared {
			w, i := k%writers, k/writers
			if smp.Time != int64(k) || !smp.Value.Equal(Float(concurrentValue(w, i))) {
				t.Fatalf("%s: shared sample %d = %d:%v, want %d:%v", where, k, smp.Time, smp.Value, k, concurrentValue(w, i))
			}
		}
	}
	check("after concurrent run")
	st := db.Stats()
	if st.Flushes == 0 {
		t.Errorf("no flush happened: %+v", st)
	}
	t.Logf("reads %d, stats %+v", reads.Load(), st)
	db = reopen(t, db, dir, opts)
	check("after reopen")
}
