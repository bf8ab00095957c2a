package memtable

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stratadb/strata/internal/point"
)

func read(tab *Table, id uint64, v View) []point.Sample {
	return tab.Read(id, minT, maxT, &v, nil)
}

// TestViewAsOf checks that a read as of a sequence number sees exactly the
// writes at or below it, with the newest version of each timestamp, even
// after a sort that a newer reader triggered.
func TestViewAsOf(t *testing.T) {
	tab := New()
	tab.ApplySeq([]point.Entry{entry(1, 10, point.Int(1)), entry(1, 20, point.Int(2))}, 5)
	tab.ApplySeq([]point.Entry{entry(1, 10, point.Int(3)), entry(1, 5, point.Int(4))}, 6)
	tab.ApplySeq([]point.Entry{entry(1, 20, point.Int(5))}, 9)

	v5 := View{AsOf: 5, Oldest: 5}
	want5 := []point.Sample{smp(10, point.Int(1)), smp(20, point.Int(2))}
	wantSamples(t, "as of 5", read(tab, 1, v5), want5)
	wantSamples(t, "as of 6", read(tab, 1, View{AsOf: 6, Oldest: 5}),
		[]point.Sample{smp(5, point.Int(4)), smp(10, point.Int(3)), smp(20, point.Int(2))})
	wantSamples(t, "latest", samples(tab, 1, minT, maxT),
		[]point.Sample{smp(5, point.Int(4)), smp(10, point.Int(3)), smp(20, point.Int(5))})
	// The latest read sorted the series while an older reader may still
	// be live; it passed Oldest = MaxUint64 and so collapsed versions. A
	// table whose readers say Oldest 5 keeps them:
	tab2 := New()
	tab2.ApplySeq([]point.Entry{entry(1, 10, point.Int(1)), entry(1, 20, point.Int(2))}, 5)
	tab2.ApplySeq([]point.Entry{entry(1, 10, point.Int(3))}, 6)
	wantSamples(t, "as of 6, oldest 5", read(tab2, 1, View{AsOf: 6, Oldest: 5}),
		[]point.Sample{smp(10, point.Int(3)), smp(20, point.Int(2))})
	wantSamples(t, "then as of 5", read(tab2, 1, v5), want5)
	if tab2.Len() != 3 {
		t.Fatalf("Len = %d, want 3 (a version kept for the reader as of 5)", tab2.Len())
	}
	checkInvariants(t, tab2)
	// Once every reader is at 6 or later, the next sort discards it.
	tab2.ApplySeq([]point.Entry{entry(1, 1, point.Int(9))}, 7)
	wantSamples(t, "oldest 7", read(tab2, 1, View{AsOf: 7, Oldest: 7}),
		[]point.Sample{smp(1, point.Int(9)), smp(10, point.Int(3)), smp(20, point.Int(2))})
	if tab2.Len() != 3 {
		t.Fatalf("Len = %d, want 3", tab2.Len())
	}
	checkInvariants(t, tab2)
}

// TestViewMasks checks that a mask hides the samples applied before it in
// its range and nothing else, and that DeleteBefore makes it physical.
func TestViewMasks(t *testing.T) {
	tab := New()
	tab.ApplySeq([]point.Entry{entry(2, 1, point.Float(1)), entry(2, 2, point.Float(2)), entry(2, 3, point.Float(3))}, 10)
	tab.ApplySeq([]point.Entry{entry(2, 2, point.Float(20))}, 12) // after the delete at 11
	mask := []Mask{{Seq: 11, Min: 2, Max: 3}}
	wantSamples(t, "masked", read(tab, 2, View{AsOf: 12, Oldest: 10, Masks: mask}),
		[]point.Sample{smp(1, point.Float(1)), smp(2, point.Float(20))})
	wantSamples(t, "masked, as of 11", read(tab, 2, View{AsOf: 11, Oldest: 10, Masks: mask}),
		[]point.Sample{smp(1, point.Float(1))})
	wantSamples(t, "unmasked, as of 10", read(tab, 2, View{AsOf: 10, Oldest: 10}),
		[]point.Sample{smp(1, point.Float(1)), smp(2, point.Float(2)), smp(3, point.Float(3))})
	tab.DeleteBefore(2, 2, 3, 11)
	wantSamples(t, "deleted", read(tab, 2, View{AsOf: 12, Oldest: 12}),
		[]point.Sample{smp(1, point.Float(1)), smp(2, point.Float(20))})
	checkInvariants(t, tab)
}

// TestDropSeq checks that a dropped write leaves no trace.
func TestDropSeq(t *testing.T) {
	tab := New()
	tab.ApplySeq([]point.Entry{entry(1, 1, point.String("a")), entry(2, 1, point.String("b"))}, 3)
	tab.ApplySeq([]point.Entry{entry(1, 1, point.String("c")), entry(2, 7, point.String("d"))}, 4)
	tab.DropSeq(4)
	wantSamples(t, "series 1", samples(tab, 1, minT, maxT), []point.Sample{smp(1, point.String("a"))})
	wantSamples(t, "series 2", samples(tab, 2, minT, maxT), []point.Sample{smp(1, point.String("b"))})
	if tab.MaxTime() != 1 {
		t.Fatalf("MaxTime = %d after dropping the write at 7", tab.MaxTime())
	}
	checkInvariants(t, tab)
}

// TestViewRandomized compares reads as of random sequence numbers, with
// random masks, against a model that keeps every write.
func TestViewRandomized(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	type write struct {
		seq uint64
		id  uint64
		ts  int64
		v   int64
	}
	for round := range 20 {
		tab := New()
		var log []write
		seq := uint64(100 * round)
		var masks []Mask
		var oldest uint64 // readers never go below an Oldest a read passed
		for range 200 {
			seq += 1 + r.Uint64N(2)
			if r.IntN(10) == 0 {
				lo := r.Int64N(50)
				masks = append(masks, Mask{Seq: seq, Min: lo, Max: lo + r.Int64N(10)})
				continue
			}
			var batch []point.Entry
			for range 1 + r.IntN(4) {
				w := write{seq: seq, id: r.Uint64N(3), ts: r.Int64N(60), v: r.Int64()}
				log = append(log, w)
				batch = append(batch, entry(w.id, w.ts, point.Int(w.v)))
			}
			tab.ApplySeq(batch, seq)
			if r.IntN(5) == 0 {
				oldest = max(oldest, seq-r.Uint64N(20))
				for q := range 3 {
					asOf := oldest + r.Uint64N(seq-oldest+1)
					id := uint64(q)
					var vm []Mask
					for _, m := range masks {
						if m.Seq <= asOf {
							vm = append(vm, m)
						}
					}
					want := map[int64]int64{}
					for _, w := range log {
						if w.id == id && w.seq <= asOf {
							want[w.ts] = w.v
						}
					}
					for ts := range want {
						for _, m := range vm {
							// the newest version is hidden when applied before the mask
							var newest uint64
							for _, w := range log {
								if w.id == id && w.ts == ts && w.seq <= asOf {
									newest = w.seq
								}
							}
							if newest < m.Seq && ts >= m.Min && ts <= m.Max {
								delete(want, ts)
							}
						}
					}
					got := read(tab, id, View{AsOf: asOf, Oldest: oldest, Masks: vm})
					if len(got) != len(want) {
						t.Fatalf("round %d as of %d: %d samples, want %d", round, asOf, len(got), len(want))
					}
					for _, s := range got {
						if v, ok := want[s.Time]; !ok || v != s.Value.Int() {
							t.Fatalf("round %d as of %d: sample %d=%d, want %d (%v)", round, asOf, s.Time, s.Value.Int(), v, ok)
						}
					}
				}
				checkInvariants(t, tab)
			}
		}
	}
}

// TestBytesMatchesHeap checks that Bytes is the table's real heap cost
// within 20%, for many short series (where per-series cost dominates) and
// few long ones. It measures the heap, it does not time anything.
func TestBytesMatchesHeap(t *testing.T) {
	for _, c := range []struct{ series, perSeries, spread int }{{100_000, 3, 1}, {20_000, 20, 97}, {500, 2000, 1}} {
		t.Run(fmt.Sprintf("%dx%d/spread=%d", c.series, c.perSeries, c.spread), func(t *testing.T) {
			batch := make([]point.Entry, 0, c.series)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			tab := New()
			for step := range c.perSeries {
				batch = batch[:0]
				for id := range c.series {
					// ids far above zero: a table must not be sized by the largest
					batch = append(batch, entry(uint64(id*c.spread)+1_000_000, int64(step)*1e9, point.Float(float64(id))))
				}
				tab.Apply(batch)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
			got := float64(tab.Bytes())
			runtime.KeepAlive(tab)
			runtime.KeepAlive(batch) // allocated before the first reading
			t.Logf("Bytes %.0f, heap growth %.0f (%.2f), %.1f B/series", got, heap, got/heap, got/float64(c.series))
			if got < 0.8*heap || got > 1.2*heap {
				t.Fatalf("Bytes() = %.0f, heap grew %.0f: not within 20%%", got, heap)
			}
			checkInvariants(t, tab)
		})
	}
}

// TestOneSampleSeries checks what a series seen once costs, the common
// case of a memtable at high cardinality: its slot and its share of the
// id map and slot pages, and the columns of one sample, not of two.
func TestOneSampleSeries(t *testing.T) {
	const n = 100_000
	tab := New()
	batch := make([]point.Entry, 0, n)
	for id := range n {
		batch = append(batch, entry(uint64(id)+1_000_000, 1e9, point.Float(1)))
	}
	tab.Apply(batch)
	// 56-byte slots, 20 bytes of columns, the id map and page slack:
	// 87 bytes a series (113 with a first chunk of two samples).
	perSeries := float64(tab.Bytes()) / n
	if limit := float64(unsafe.Sizeof(memSeries{})+sampleBytes) + 16; perSeries > limit {
		t.Fatalf("a one-sample series costs %.1f bytes, want at most %.0f", perSeries, limit)
	}
	checkInvariants(t, tab)
}

// TestNotSizedByLargestID checks that a table holding a few series with
// huge ids stays small: nothing is sized by the largest id.
func TestNotSizedByLargestID(t *testing.T) {
	tab := New()
	tab.Apply([]point.Entry{entry(1<<40, 1, point.Int(1)), entry(10_000_000, 1, point.Int(2)), entry(3, 1, point.Int(3))})
	if b := tab.Bytes(); b > 8<<10 {
		t.Fatalf("Bytes() = %d for three series", b)
	}
	for _, id := range []uint64{1 << 40, 10_000_000, 3} {
		if got := samples(tab, id, minT, maxT); len(got) != 1 {
			t.Fatalf("series %d: %v", id, got)
		}
	}
	if ids := tab.IDs(); len(ids) != 3 || ids[0] != 3 || ids[2] != 1<<40 {
		t.Fatalf("IDs() = %v", ids)
	}
	checkInvariants(t, tab)
}
