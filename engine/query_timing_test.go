package engine

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Dashboard benchmark: a gateway with many devices. dashSeries series
// (measurement sensor, tags device_id=dev-%06d and site=site-%03d, device
// i at site i%dashSites, field temperature), dashSteps samples each,
// flushed, compacted and reopened.
const (
	dashSeries = 200_000
	dashSites  = 100
	dashSteps  = 5
)

func buildDashboardDB(b *testing.B) *DB {
	dir := b.TempDir()
	opts := benchOptions()
	db, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	tags := make([][]Tag, dashSeries)
	for i := range tags {
		tags[i] = []Tag{{Key: "device_id", Value: fmt.Sprintf("dev-%06d", i)}, {Key: "site", Value: fmt.Sprintf("site-%03d", i%dashSites)}}
	}
	batch := make([]Point, 0, benchBatch)
	for s := range dashSteps {
		for i := range dashSeries {
			batch = append(batch, Point{Measurement: "sensor", Tags: tags[i],
				Fields: []Field{{Key: "temperature", Value: Float(20 + float64((i+s)%50)/10)}},
				Time:   benchT0 + int64(s)*benchStep})
			if len(batch) == cap(batch) {
				if err := db.Write(batch); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
	}
	if err := db.Write(batch); err != nil {
		b.Fatal(err)
	}
	if err := db.Compact(); err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	if db, err = Open(dir, opts); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// BenchmarkDashboard times the questions a dashboard asks of a
// 200k-series database: the values of a tag for a dashboard variable, the
// current value of every device, the measurements, and the mean per site
// against the per-series mean over the same data.
func BenchmarkDashboard(b *testing.B) {
	db := buildDashboardDB(b)
	ctx := context.Background()
	all := Selector{Measurement: "sensor"}

	run := func(name string, want int, f func() (int, error)) {
		b.Run(name, func(b *testing.B) {
			// One call first, as a running gateway has made: it builds the
			// per-segment id maps and the key ranks, which later calls reuse.
			if _, err := f(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				n, err := f()
				if err != nil {
					b.Fatal(err)
				}
				if n != want {
					b.Fatalf("%d results, want %d", n, want)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
			// CPU time (all threads, GC included) resists other load on
			// the machine better than wall time.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
	run("TagValues200k", dashSeries, func() (int, error) {
		v, err := db.TagValues(ctx, "device_id", Selector{})
		return len(v), err
	})
	run("TagValuesSite", dashSites, func() (int, error) {
		v, err := db.TagValues(ctx, "site", all)
		return len(v), err
	})
	run("LastAll", dashSeries, func() (int, error) {
		s, err := db.Last(ctx, all)
		return len(s), err
	})
	run("Measurements", 1, func() (int, error) {
		m, err := db.Measurements(ctx)
		return len(m), err
	})
	run("SeriesRegexp", dashSeries/10, func() (int, error) {
		s, err := db.SeriesInfo(ctx, Selector{Measurement: "sensor", Matchers: []Matcher{{Key: "device_id", Op: MatchRegexp, Value: "dev-0[0-1].*"}}})
		return len(s), err
	})
	run("MeanPerSeries", dashSeries, func() (int, error) {
		s, err := db.Query(ctx, Query{Selector: all, Agg: AggMean})
		return len(s), err
	})
	run("MeanBySite", dashSites, func() (int, error) {
		s, err := db.Query(ctx, Query{Selector: all, Agg: AggMean, GroupBy: []string{"site"}})
		return len(s), err
	})
	run("LastOneDevice", 1, func() (int, error) {
		s, err := db.Last(ctx, Selector{Measurement: "sensor", Tags: []Tag{{Key: "device_id", Value: "dev-123456"}}, Start: benchT0, End: benchT0 + int64(time.Hour)})
		return len(s), err
	})
}
