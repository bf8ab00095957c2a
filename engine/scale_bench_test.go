package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/vfs"
)

// The cardinality shapes of the scale benchmarks: many series with few
// points each, and the 1k-series baseline for comparison. Each is the
// baseline dataset with another number of devices and steps.
var scaleShapes = []struct {
	series, points int
}{
	{1_000, 1_000},
	{200_000, 10},
	{1_000_000, 3},
}

// BenchmarkWriteSeries inserts each shape through Write in batches of
// 10,000 points into a fresh database per iteration (Open to Close,
// SyncNever), reporting throughput, allocation and bytes on disk per
// point. After the last iteration it reopens the database and reports the
// heap the open database holds per series, key bytes excluded
// (heap-B/series), and how long that Open took (open-ms).
func BenchmarkWriteSeries(b *testing.B) {
	for _, sh := range scaleShapes {
		b.Run(fmt.Sprintf("series=%d/points=%d", sh.series, sh.points), func(b *testing.B) {
			batches := iotBatches(sh.series, sh.points, benchBatch)
			points := float64(sh.series * sh.points)
			var dir string
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ReportAllocs()
			for b.Loop() {
				dir = b.TempDir()
				db, err := Open(dir, benchOptions())
				if err != nil {
					b.Fatal(err)
				}
				for _, batch := range batches {
					if err := db.Write(batch); err != nil {
						b.Fatal(err)
					}
				}
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			n := float64(b.N) * points
			b.ReportMetric(n/b.Elapsed().Seconds(), "points/s")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "alloc-B/point")
			b.ReportMetric(float64(dirBytes(b, dir))/points, "disk-B/point")
			batches = nil
			perSeries, took := openHeapPerSeries(b, dir, sh.series)
			b.ReportMetric(perSeries, "heap-B/series")
			b.ReportMetric(float64(took.Milliseconds()), "open-ms")
		})
	}
}

// openHeapPerSeries opens the database in dir and returns the live heap it
// holds per series, minus the bytes of the series keys, and how long Open
// took.
func openHeapPerSeries(b *testing.B, dir string, series int) (float64, time.Duration) {
	b.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	db, err := Open(dir, benchOptions())
	took := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	runtime.GC()
	runtime.ReadMemStats(&after)
	var keyBytes int
	db.cat.mu.RLock()
	if n := len(db.cat.series); n != series {
		b.Fatalf("%d series after reopen, want %d", n, series)
	}
	for i := range db.cat.series {
		keyBytes += len(db.cat.series[i].key)
	}
	db.cat.mu.RUnlock()
	return (float64(after.HeapAlloc) - float64(before.HeapAlloc) - float64(keyBytes)) / float64(series), took
}

// BenchmarkQuerySeries runs the 1-minute mean per device over a database of
// 200,000 series of 10 points each, reopened after the insert.
func BenchmarkQuerySeries(b *testing.B) {
	const series, steps = 200_000, 10
	dir := b.TempDir()
	db, err := Open(dir, benchOptions())
	if err != nil {
		b.Fatal(err)
	}
	for _, batch := range iotBatches(series, steps, benchBatch) {
		if err := db.Write(batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	if db, err = Open(dir, benchOptions()); err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	end := benchT0 + steps*benchStep
	q := Query{Selector: Selector{Measurement: "sensor", Start: benchT0, End: end}, Agg: AggMean, Every: int64(time.Minute)}
	b.Run("Mean1mPerDevice", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := db.Query(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			if len(res) != series {
				b.Fatalf("%d series, want %d", len(res), series)
			}
		}
	})
}

// BenchmarkCatalogLoad loads the series catalog file of a database holding
// 1M series of the baseline's shape (what Open does before it replays the
// WAL) and reports the heap the catalog holds per series, key bytes
// excluded (catalog-B/series), and the load time per series.
func BenchmarkCatalogLoad(b *testing.B) {
	const series = 1_000_000
	path := filepath.Join(b.TempDir(), catalogName)
	c := newCatalog()
	cf, _, err := loadCatalog(vfs.Default, path, c)
	if err != nil {
		b.Fatal(err)
	}
	keys := catalogKeys(series)
	var keyBytes int
	for i, k := range keys {
		c.add(k, KindFloat)
		keyBytes += len(k)
		if (i+1)%200_000 == 0 { // one record per flush
			if err := cf.persist(c, i+1); err != nil {
				b.Fatal(err)
			}
		}
	}
	cf.close()
	keys, c = nil, nil
	var before, after runtime.MemStats
	var perSeries float64
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		c := newCatalog()
		cf, _, err := loadCatalog(vfs.Default, path, c)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cf.close()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if c.len() != series {
			b.Fatalf("%d series loaded", c.len())
		}
		perSeries = (float64(after.HeapAlloc) - float64(before.HeapAlloc) - float64(keyBytes)) / series
		runtime.KeepAlive(c)
		b.StartTimer()
	}
	b.ReportMetric(perSeries, "catalog-B/series")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*series), "ns/series")
}
