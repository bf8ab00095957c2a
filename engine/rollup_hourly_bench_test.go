package engine

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkRollupHourly times an hourly mean over 23 days of one series
// held as 1-minute rollups (30 days of 1 s data written, raw kept 7 days),
// the query BenchmarkRollupFigures measures once, for profiling.
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
	q := Query{Selector: Selector{Measurement: "sensor", Field: "temp", Start: start, End: end - 7*24*3600*sec}, Agg: AggMean, Every: int64(time.Hour)}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := db.Query(context.Background(), q); err != nil {
			b.Fatal(err)
		}
	}
}
