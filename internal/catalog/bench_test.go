package catalog

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/testutil"
	"github.com/stratadb/strata/internal/vfs"
)

// BenchmarkCatalogLoad loads the series catalog file of a database holding
// 1M series of the baseline's shape (what Open does before it replays the
// WAL) and reports the heap the catalog holds per series, key bytes
// excluded (catalog-B/series; core-B/series without the index by
// measurement and tag), and the load time per series.
func BenchmarkCatalogLoad(b *testing.B) {
	const series = 1_000_000
	path := filepath.Join(b.TempDir(), "SERIES")
	c := New()
	cf, _, err := loadCatalog(vfs.Default, path, c)
	if err != nil {
		b.Fatal(err)
	}
	keys := catalogKeys(series)
	var keyBytes int
	for i, k := range keys {
		c.add(k, point.KindFloat)
		keyBytes += len(k)
		if (i+1)%200_000 == 0 { // one record per flush
			if err := cf.Persist(c, i+1); err != nil {
				b.Fatal(err)
			}
		}
	}
	cf.Close()
	keys, c = nil, nil
	var before, after runtime.MemStats
	var perSeries, corePerSeries float64
	var cpu time.Duration // all threads, GC included: steadier than wall time on a busy machine
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		cpu0 := testutil.CPUTime()
		c := New()
		cf, _, err := loadCatalog(vfs.Default, path, c)
		if err != nil {
			b.Fatal(err)
		}
		cpu += testutil.CPUTime() - cpu0
		b.StopTimer()
		cf.Close()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if c.Len() != series {
			b.Fatalf("%d series loaded", c.Len())
		}
		perSeries = (float64(after.HeapAlloc) - float64(before.HeapAlloc) - float64(keyBytes)) / series
		// Without the inverted index by measurement and tag: the series
		// and tag sets alone.
		c.idx = index{}
		runtime.GC()
		runtime.ReadMemStats(&after)
		corePerSeries = (float64(after.HeapAlloc) - float64(before.HeapAlloc) - float64(keyBytes)) / series
		runtime.KeepAlive(c)
		b.StartTimer()
	}
	b.ReportMetric(perSeries, "catalog-B/series")
	b.ReportMetric(corePerSeries, "core-B/series")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*series), "ns/series")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}
