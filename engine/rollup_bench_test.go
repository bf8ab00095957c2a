package engine

import (
	"context"
	"fmt"
	"math"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/testutil"
)

// BenchmarkRollupFigures measures downsampling on 30 days of 1 s data,
// raw kept 7 days, 1-minute rollups after that, against a database
// without rules fed the same points: ingest rate (writes, flushes and
// compactions to the end, in CPU time), disk, and a 30-day hourly mean
// from each (CPU time)
// (also over the 23 rolled-up days alone, hourly, daily and as one mean),
// with whether the answers are
// bit-identical. The shape is 1,000 series (2.6 G points); on a
// shared machine it runs STRATA_ROLLUP_BENCH_SERIES series (default 4,
// 10.4 M points), the same time shape. It runs its work once whatever
// b.N:
//
//	go test -run XXX -bench RollupFigures -benchtime 1x ./engine
func BenchmarkRollupFigures(b *testing.B) {
	series := 4
	if s := os.Getenv("STRATA_ROLLUP_BENCH_SERIES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("STRATA_ROLLUP_BENCH_SERIES=%q", s)
		}
		series = n
	}
	const days = 30
	const sec = int64(time.Second)
	start := int64(1_800_000_000) * sec / (24 * 3600 * sec) * (24 * 3600 * sec) // on a day
	end := start + days*24*3600*sec
	now := func() time.Time { return time.Unix(0, end) }
	ingest := func(dir string, rules []RollupRule) (time.Duration, int64) {
		opts := quietOptions()
		opts.Sync = SyncNever
		opts.Now = now
		opts.Rollups = rules
		db, err := Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		began := testutil.CPUTime()
		pts := make([]Point, 0, 10000)
		for t := start; t < end; t += sec {
			for s := range series {
				// A reading of two decimals drifting around 20.
				k := (t/sec)%86400 + int64(s)*977
				v := 20 + float64((k*7919)%2000-1000)/100
				pts = append(pts, pt("sensor", []Tag{{Key: "dev", Value: fmt.Sprint(s)}}, "temp", Float(v), t))
			}
			if len(pts) >= 10000 {
				if err := db.Write(pts); err != nil {
					b.Fatal(err)
				}
				pts = pts[:0]
			}
		}
		if err := db.Write(pts); err != nil {
			b.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := db.Compact(); err != nil {
			b.Fatal(err)
		}
		return testutil.CPUTime() - began, testutil.DirBytes(b, dir)
	}
	query := func(dir string, from, to int64, every time.Duration) ([]Series, time.Duration) {
		opts := quietOptions()
		opts.ReadOnly = true
		opts.Now = now
		db, err := Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		q := Query{Selector: Selector{Measurement: "sensor", Field: "temp", Start: from, End: to}, Agg: AggMean, Every: int64(every)}
		// CPU time, the least of 5 runs: other load on the machine skews
		// wall time far more.
		best := time.Duration(math.MaxInt64)
		var res []Series
		for range 5 {
			began := testutil.CPUTime()
			r, err := db.Query(context.Background(), q)
			if err != nil {
				b.Fatal(err)
			}
			best, res = min(best, testutil.CPUTime()-began), r
		}
		return res, best
	}
	points := float64(series) * days * 24 * 3600
	for b.Loop() {
		rawDir, rollDir := b.TempDir(), b.TempDir()
		rawTook, rawBytes := ingest(rawDir, nil)
		rollTook, rollBytes := ingest(rollDir, []RollupRule{{Measurement: "sensor", Every: time.Minute, After: 7 * 24 * time.Hour}})
		b.ReportMetric(points, "points")
		b.ReportMetric(points/rawTook.Seconds(), "raw-points/cpu-s")
		b.ReportMetric(points/rollTook.Seconds(), "rollup-points/cpu-s")
		b.ReportMetric(float64(rawBytes)/points, "raw-disk-B/point")
		b.ReportMetric(float64(rollBytes)/points, "rollup-disk-B/point")
		b.ReportMetric(100*float64(rollBytes)/float64(rawBytes), "disk-%-of-raw")
		// The 23 rolled-up days against their raw size, taking the raw
		// database's bytes as even over its 30 days (the data is).
		raw7 := float64(rawBytes) * 7 / days
		b.ReportMetric(100*(float64(rollBytes)-raw7)/(float64(rawBytes)-raw7), "rolled-days-disk-%-of-raw")
		for _, span := range []struct {
			name     string
			from, to int64
			every    time.Duration
		}{
			{"30d", start, end, time.Hour},
			{"23d-rolled", start, end - 7*24*3600*sec, time.Hour},
			{"23d-rolled-daily", start, end - 7*24*3600*sec, 24 * time.Hour},
			{"23d-rolled-total", start, end - 7*24*3600*sec, 0},
			{"7d-raw", end - 7*24*3600*sec, end, time.Hour},
		} {
			want, rawQ := query(rawDir, span.from, span.to, span.every)
			got, rollQ := query(rollDir, span.from, span.to, span.every)
			same := 0.0
			if reflect.DeepEqual(got, want) {
				same = 1
			}
			b.ReportMetric(float64(rawQ.Microseconds()), span.name+"-raw-mean-cpu-us")
			b.ReportMetric(float64(rollQ.Microseconds()), span.name+"-rollup-mean-cpu-us")
			b.ReportMetric(float64(rawQ)/float64(rollQ), span.name+"-speedup-x")
			b.ReportMetric(same, span.name+"-bit-identical")
		}
	}
}
