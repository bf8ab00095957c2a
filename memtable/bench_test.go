package memtable

import (
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/testutil"
)

// iotBatches builds the insert baseline as entries: devices x steps
// samples, all devices at t0, then all at t1, ..., split into batches of
// batchSize entries. Series id i is device i's temperature.
func iotBatches(devices, steps, batchSize int) [][]point.Entry {
	w := testutil.NewIoTWalk(devices)
	all := make([]point.Entry, 0, devices*steps)
	for range steps {
		t, temps := w.Next()
		for i, v := range temps {
			all = append(all, point.Entry{ID: uint64(i), Time: t, Value: point.Float(v)})
		}
	}
	var batches [][]point.Entry
	for len(all) > 0 {
		n := min(batchSize, len(all))
		batches = append(batches, all[:n:n])
		all = all[n:]
	}
	return batches
}

// measureTables applies batches to a fresh table per iteration and reports,
// per entry written: entries/s, B/entry allocated, held-B/entry (the last
// table's Bytes) and heap-B/entry (the live heap the last table holds after
// a collection, from runtime.MemStats), and the Bytes of a series.
func measureTables(b *testing.B, series int, batches [][]point.Entry) {
	entries := 0
	for _, batch := range batches {
		entries += len(batch)
	}
	var before, after, live runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	var tab *Table
	for b.Loop() {
		tab = nil // the previous table may be collected
		tab = New()
		for _, batch := range batches {
			tab.Apply(batch)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	runtime.GC()
	runtime.ReadMemStats(&live)
	held := tab.Bytes()
	runtime.KeepAlive(tab)
	runtime.KeepAlive(batches) // counted in before: must not be collected
	n := float64(b.N) * float64(entries)
	b.ReportMetric(n/b.Elapsed().Seconds(), "entries/s")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/entry")
	b.ReportMetric(float64(held)/float64(entries), "held-B/entry")
	b.ReportMetric((float64(live.HeapAlloc)-float64(before.HeapAlloc))/float64(entries), "heap-B/entry")
	b.ReportMetric(float64(held)/float64(series), "held-B/series")
}

// BenchmarkApply writes the 1M-point baseline (1,000 series x 1,000
// timestamps in batches of 10,000) into a fresh table per iteration.
func BenchmarkApply(b *testing.B) {
	const devices, steps = 1000, 1000
	batches := iotBatches(devices, steps, 10_000)
	measureTables(b, devices, batches)
}

// BenchmarkApplyOutOfOrder writes the same data with every batch's
// timestamps reversed within each series, then reads every series once,
// which sorts them.
func BenchmarkApplyOutOfOrder(b *testing.B) {
	const devices, steps = 1000, 1000
	batches := iotBatches(devices, steps, 10_000)
	for _, batch := range batches {
		for i, j := 0, len(batch)-devices; i < j; i, j = i+devices, j-devices {
			for d := range devices {
				batch[i+d].Time, batch[j+d].Time = batch[j+d].Time, batch[i+d].Time
			}
		}
	}
	b.ReportAllocs()
	var dst []point.Sample
	for b.Loop() {
		tab := New()
		for _, batch := range batches {
			tab.Apply(batch)
		}
		for id := range uint64(devices) {
			dst = tab.Samples(id, math.MinInt64, math.MaxInt64, dst[:0])
		}
	}
	b.ReportMetric(float64(b.N)*devices*steps/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkSamples reads one 1,000-sample series into a reused buffer.
func BenchmarkSamples(b *testing.B) {
	const n = 1000
	tab := New()
	batch := make([]point.Entry, n)
	for i := range batch {
		batch[i] = point.Entry{ID: 3, Time: int64(i) * 1e9, Value: point.Float(float64(i) / 4)}
	}
	tab.Apply(batch)
	dst := make([]point.Sample, 0, n)
	b.ReportAllocs()
	for b.Loop() {
		dst = tab.Samples(3, math.MinInt64, math.MaxInt64, dst[:0])
	}
	if len(dst) != n {
		b.Fatalf("read %d samples, want %d", len(dst), n)
	}
	b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkApplySeries writes the cardinality shapes of the scale targets:
// many series with few samples each, in batches of 10,000 entries, all
// series at one time then all at the next. Series ids start high, as in a
// database that has issued many before: the table must not be sized by them.
func BenchmarkApplySeries(b *testing.B) {
	for _, c := range []struct{ series, steps int }{{200_000, 10}, {1_000_000, 3}} {
		b.Run(fmt.Sprintf("series=%d/points=%d", c.series, c.steps), func(b *testing.B) {
			const t0 = 1_700_000_000 * int64(1e9)
			batches := make([][]point.Entry, 0, c.series*c.steps/10_000+1)
			batch := make([]point.Entry, 0, 10_000)
			for step := range c.steps {
				for id := range c.series {
					batch = append(batch, point.Entry{ID: uint64(5_000_000 + id), Time: t0 + int64(step)*1e9, Value: point.Float(float64(id % 100))})
					if len(batch) == cap(batch) {
						batches = append(batches, batch)
						batch = make([]point.Entry, 0, 10_000)
					}
				}
			}
			batches = append(batches, batch)
			measureTables(b, c.series, batches)
		})
	}
}
