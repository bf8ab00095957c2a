package engine

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/testutil"
)

// The baseline dataset (docs/benchmarks.md): devices x steps points of measurement
// sensor, tags device_id=dev-%04d and site=site-%02d (device i at site
// i%10), field temperature: device i starts at 20 + i%7 and each following
// step adds a uniform delta in [-0.25, 0.25) from a PCG seeded (904, i),
// rounded to 0.01. Timestamps start at 1,700,000,000 s, 1 s apart; all
// devices at t0, then all at t1, and so on.
const (
	benchDevices = 1000
	benchSteps   = 1000
	benchBatch   = 10_000
	benchT0      = int64(1_700_000_000) * int64(time.Second)
	benchStep    = int64(time.Second)
)

// iotBatches generates the dataset as batches of batch points.
func iotBatches(devices, steps, batch int) [][]Point {
	g := newIoTGen(devices)
	points := make([]Point, 0, devices*steps)
	fields := make([]Field, devices*steps) // one backing array for all points
	for range steps {
		t, temps := g.walk.Next()
		for i, v := range temps {
			k := len(points)
			fields[k] = Field{Key: testutil.IoTField, Value: Float(v)}
			points = append(points, Point{Measurement: testutil.IoTMeasurement, Tags: g.tags[i], Fields: fields[k : k+1 : k+1], Time: t})
		}
	}
	var batches [][]Point
	for len(points) > 0 {
		n := min(batch, len(points))
		batches = append(batches, points[:n:n])
		points = points[n:]
	}
	return batches
}

func benchOptions() *Options {
	return &Options{Sync: SyncNever, Logger: slog.New(slog.DiscardHandler)}
}

// BenchmarkWrite1M inserts the 1M-point dataset through Write in batches of
// 10,000 points into a fresh database per iteration (Open to Close,
// SyncNever).
func BenchmarkWrite1M(b *testing.B) {
	benchInsert(b, iotBatches(benchDevices, benchSteps, benchBatch), benchDevices*benchSteps)
}

// benchInsert writes batches (points in all) into a fresh database per
// iteration, Open to Close, and reports points/s, Go heap allocated per
// point and bytes on disk per point. It returns the last database's
// directory, closed.
func benchInsert(b *testing.B, batches [][]Point, points int) string {
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
	n := float64(b.N) * float64(points)
	b.ReportMetric(n/b.Elapsed().Seconds(), "points/s")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "alloc-B/point")
	b.ReportMetric(float64(testutil.DirBytes(b, dir))/float64(points), "disk-B/point")
	return dir
}

// BenchmarkQuery runs the baseline's queries on a database holding the 1M
// dataset, reopened after the insert as the bench harness does.
func BenchmarkQuery(b *testing.B) {
	dir := b.TempDir()
	db, err := Open(dir, benchOptions())
	if err != nil {
		b.Fatal(err)
	}
	for _, batch := range iotBatches(benchDevices, benchSteps, benchBatch) {
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
	end := benchT0 + benchSteps*benchStep
	minute := int64(time.Minute)
	cases := []struct {
		name    string
		q       Query
		series  int // series expected in the result
		samples int // samples expected in the result
	}{
		{"Point", Query{Selector: Selector{Measurement: "sensor", Tags: []Tag{{Key: "device_id", Value: "dev-0500"}},
			Start: benchT0 + 300*benchStep, End: benchT0 + 300*benchStep + minute}}, 1, 60},
		{"Range10m", Query{Selector: Selector{Measurement: "sensor", Start: benchT0 + 100*benchStep, End: benchT0 + 100*benchStep + 10*minute}},
			benchDevices, benchDevices * 600},
		{"Mean1mPerDevice", Query{Selector: Selector{Measurement: "sensor", Start: benchT0, End: end}, Agg: AggMean, Every: minute},
			benchDevices, benchDevices * int((end-1)/minute-benchT0/minute+1)},
		{"MeanAll", Query{Selector: Selector{Measurement: "sensor", Start: benchT0, End: end}, Agg: AggMean},
			benchDevices, benchDevices},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var scanned int
			for b.Loop() {
				res, err := db.Query(ctx, c.q)
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for _, s := range res {
					n += len(s.Samples)
				}
				if len(res) != c.series || n != c.samples {
					b.Fatalf("%d series and %d samples, want %d and %d", len(res), n, c.series, c.samples)
				}
				scanned += n
			}
			b.ReportMetric(float64(scanned)/b.Elapsed().Seconds(), "results/s")
		})
	}
	// The raw ranges again through QuerySeq, one series at a time.
	for _, c := range cases[:2] {
		b.Run("Seq"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			var scanned int
			for b.Loop() {
				n, series := 0, 0
				for s, err := range db.QuerySeq(ctx, c.q) {
					if err != nil {
						b.Fatal(err)
					}
					series++
					n += len(s.Samples)
				}
				if series != c.series || n != c.samples {
					b.Fatalf("%d series and %d samples, want %d and %d", series, n, c.series, c.samples)
				}
				scanned += n
			}
			b.ReportMetric(float64(scanned)/b.Elapsed().Seconds(), "results/s")
		})
	}
	// The raw ranges again through Scan, which yields columns.
	for _, c := range cases[:2] {
		b.Run("Scan"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			var scanned int
			for b.Loop() {
				n, series, last := 0, 0, ""
				for cols, err := range db.Scan(ctx, c.q.Selector) {
					if err != nil {
						b.Fatal(err)
					}
					if cols.Tags[0].Value != last {
						series, last = series+1, cols.Tags[0].Value
					}
					n += cols.Len()
				}
				if series != c.series || n != c.samples {
					b.Fatalf("%d series and %d samples, want %d and %d", series, n, c.series, c.samples)
				}
				scanned += n
			}
			b.ReportMetric(float64(scanned)/b.Elapsed().Seconds(), "results/s")
		})
	}
}
