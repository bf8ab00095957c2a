package engine

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/testutil"
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
			dir := benchInsert(b, batches, sh.series*sh.points)
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
	if n := db.cat.Len(); n != series {
		b.Fatalf("%d series after reopen, want %d", n, series)
	}
	for _, s := range db.cat.Since(0) {
		keyBytes += len(s.Key)
	}
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

// BenchmarkWriteDepth inserts 1M, 10M and 100M points at 1,000 series
// (deeper series, the same shape as the baseline), generated batch by
// batch so that the dataset does not sit in memory, from Open to Close.
// It reports throughput, the largest Go heap in use seen after a batch
// (peak-heap-MiB), which the memory budget should bound whatever the data
// size, CPU per point, and the last run's write stalls, slowdowns and
// compactions. With -short it writes 1M points only:
//
//	go test -run '^$' -bench WriteDepth -benchtime 1x -count 3 ./engine/
func BenchmarkWriteDepth(b *testing.B) {
	const devices = benchDevices
	for _, points := range []int{1_000_000, 10_000_000, 100_000_000} {
		if testing.Short() && points > 1_000_000 {
			continue
		}
		b.Run(fmt.Sprintf("points=%d", points), func(b *testing.B) {
			steps := points / devices
			var peak uint64
			var ms runtime.MemStats
			var st Stats
			b.ReportAllocs()
			cpu0 := testutil.CPUTime()
			for b.Loop() {
				db, err := Open(b.TempDir(), benchOptions())
				if err != nil {
					b.Fatal(err)
				}
				g := newIoTGen(devices)
				for s := 0; s < steps; s += benchBatch / devices {
					if err := db.Write(g.batch(s, benchBatch/devices)); err != nil {
						b.Fatal(err)
					}
					if s%(50*benchBatch/devices) == 0 {
						runtime.ReadMemStats(&ms)
						peak = max(peak, ms.HeapInuse)
					}
				}
				st = db.Stats()
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(b.N * devices * steps)
			b.ReportMetric(n/b.Elapsed().Seconds(), "points/s")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64((testutil.CPUTime()-cpu0).Nanoseconds())/n, "cpu-ns/point")
			b.ReportMetric(float64(st.WriteStalls), "stalls")
			b.ReportMetric(float64(st.WriteSlowdowns), "slowdowns")
			b.ReportMetric(float64(st.Compactions), "compactions")
		})
	}
}

// iotGen generates the baseline dataset a few steps at a time into reused
// buffers, with the same values as iotBatches.
type iotGen struct {
	tags   [][]Tag
	walk   *testutil.IoTWalk
	points []Point
	fields []Field
}

func newIoTGen(devices int) *iotGen {
	g := &iotGen{tags: make([][]Tag, devices), walk: testutil.NewIoTWalk(devices)}
	for i := range devices {
		g.tags[i] = testutil.IoTTags(i)
	}
	return g
}

// batch returns steps [from, from+n) of every device; it must be called
// with consecutive ranges.
func (g *iotGen) batch(from, n int) []Point {
	g.points = g.points[:0]
	if cap(g.fields) < n*len(g.tags) {
		g.fields = make([]Field, n*len(g.tags))
	}
	for range n {
		t, temps := g.walk.Next()
		for i, v := range temps {
			k := len(g.points)
			g.fields[k] = Field{Key: testutil.IoTField, Value: Float(v)}
			g.points = append(g.points, Point{Measurement: testutil.IoTMeasurement, Tags: g.tags[i], Fields: g.fields[k : k+1 : k+1], Time: t})
		}
	}
	return g.points
}

// TestIoTGen checks that the streaming generator yields the dataset of
// iotBatches.
func TestIoTGen(t *testing.T) {
	const devices, steps = 30, 40
	var want []Point
	for _, b := range iotBatches(devices, steps, 100) {
		want = append(want, b...)
	}
	g := newIoTGen(devices)
	var got []Point
	for s := 0; s < steps; s += 4 {
		for _, p := range g.batch(s, 4) {
			p.Fields = slices.Clone(p.Fields)
			got = append(got, p)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d points, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Time != want[i].Time || !slices.Equal(got[i].Tags, want[i].Tags) || !got[i].Fields[0].Value.Equal(want[i].Fields[0].Value) {
			t.Fatalf("point %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
