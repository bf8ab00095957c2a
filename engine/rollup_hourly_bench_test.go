package engine

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkRollupHourly times an hourly mean of one series over its 23
// days held as 1-minute rollups, over all 30 days written (1 s data, raw
// kept 7 days) and over the raw week alone: the queries
// BenchmarkRollupFigures measures once, for profiling.
func BenchmarkRollupHourly(b *testing.B) {
	const days = 30
	const sec = int64(time.Second)
	start := int64(1_800_000_000) * sec / (24 * 3600 * sec) * (24 * 3600 * sec)
	end := start + days*24*3600*sec
	now := func() time.Time { return time.Unix(0, end) }
	dir := b.TempDir()
	opts := quietOptions()
	opts.Sync = SyncNever
	opts.Now = now
	opts.Rollups = []RollupRule{{Measurement: "sensor", Every: time.Minute, After: 7 * 24 * time.Hour}}
	db, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	pts := make([]Point, 0, 10000)
	for t := start; t < end; t += sec {
		k := (t / sec) % 86400
		pts = append(pts, pt("sensor", []Tag{{Key: "dev", Value: fmt.Sprint(0)}}, "temp", Float(20+float64((k*7919)%2000-1000)/100), t))
		if len(pts) == cap(pts) {
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
	defer db.Close()
	for _, r := range []struct {
		name     string
		from, to int64
	}{{"23d-rolled", start, end - 7*24*3600*sec}, {"30d", start, end}, {"7d-raw", end - 7*24*3600*sec, end}} {
		b.Run(r.name, func(b *testing.B) {
			q := Query{Selector: Selector{Measurement: "sensor", Field: "temp", Start: r.from, End: r.to}, Agg: AggMean, Every: int64(time.Hour)}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := db.Query(context.Background(), q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
