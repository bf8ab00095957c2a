package catalog

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stratadb/strata/internal/point"
)

// BenchmarkAddSeries1M adds a million new series of one field each, the
// shape of the scale benchmarks, through AddAll (the engine's path for
// new series) and reports the Go heap allocated per series (alloc-B/series,
// keys excluded: they are built before the timer) and the allocations per
// series.
func BenchmarkAddSeries1M(b *testing.B) {
	const series = 1_000_000
	keys := make([]string, series)
	for i := range keys {
		keys[i] = fmt.Sprintf("sensor,device_id=dev-%07d,region=r%d value", i, i%16)
	}
	var before, after runtime.MemStats
	var bytes, allocs uint64
	b.ReportAllocs()
	for b.Loop() {
		runtime.ReadMemStats(&before)
		c := New()
		c.AddAll(series, func(i int) (string, point.Kind) { return keys[i], point.KindFloat })
		runtime.ReadMemStats(&after)
		if c.Len() != series {
			b.Fatalf("%d series", c.Len())
		}
		bytes += after.TotalAlloc - before.TotalAlloc
		allocs += after.Mallocs - before.Mallocs
	}
	b.ReportMetric(float64(bytes)/float64(b.N*series), "alloc-B/series")
	b.ReportMetric(float64(allocs)/float64(b.N*series), "allocs/series")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*series), "ns/series")
}
