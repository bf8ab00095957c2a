package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stratadb/strata/engine"
)

// BenchmarkInsert is the baseline's workload at 100k points (1,000 devices
// x 100 timestamps, batches of 10,000), in process, one sub-benchmark per
// engine and durability it supports in the default configuration. Each iteration
// inserts into a fresh directory, from before Open to after Close. It
// reports points/s and the bytes on disk per point, for benchstat:
//
//	go test -run '^$' -bench . -count 6 ./bench/ | tee new.txt
func BenchmarkInsert(b *testing.B) {
	ds, err := IoT(100_000, 1000, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range Engines() {
		open, err := lookup(name)
		if err != nil {
			b.Fatal(err)
		}
		for _, dur := range []Durability{Fast, Durable} {
			if !Supports(name, ConfigDefault, dur) {
				continue
			}
			b.Run(name+"/"+string(dur), func(b *testing.B) {
				root := b.TempDir()
				var disk int64
				n := 0
				b.ReportAllocs()
				for b.Loop() {
					dir := filepath.Join(root, strconv.Itoa(n))
					n++
					if _, err := insert(context.Background(), open, dir, ConfigDefault, dur, ds, 10_000, nil); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if disk, err = dirSize(dir); err != nil {
						b.Fatal(err)
					}
					os.RemoveAll(dir)
					forgetMem(dir)
					b.StartTimer()
				}
				b.ReportMetric(float64(n*ds.Len())/b.Elapsed().Seconds(), "points/s")
				b.ReportMetric(float64(disk)/float64(ds.Len()), "B/point")
			})
		}
	}
}

// BenchmarkFloor compares the in-memory floor's insert with strata's on the
// baseline dataset (1,000,000 points of 1,000 series, batches of 10,000,
// fast, default configuration), timed as the bench command times it, from
// before Open to after Close. The floor must be the faster: it does only
// what any engine must (find each point's series, append the sample).
//
//	go test -run '^$' -bench Floor -benchtime 5x ./bench/
func BenchmarkFloor(b *testing.B) {
	ds, err := IoT(1_000_000, 1000, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{EngineMemLimit, EngineStrata} {
		open, err := lookup(name)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			root := b.TempDir()
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				dir := filepath.Join(root, strconv.Itoa(n))
				n++
				if _, err := insert(context.Background(), open, dir, ConfigDefault, Fast, ds, 10_000, nil); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				os.RemoveAll(dir)
				forgetMem(dir)
				b.StartTimer()
			}
			b.ReportMetric(float64(n*ds.Len())/b.Elapsed().Seconds(), "points/s")
		})
	}
}

// BenchmarkSeriesIndex finds the series of the baseline's points (1,000
// tag sets, one field) through the tag-slice cache, as the bench's shared
// tag slices allow, and through the identity key alone, as points whose
// tags are fresh copies (a parser's) would. Neither allocates.
func BenchmarkSeriesIndex(b *testing.B) {
	ds, err := IoT(100_000, 1000, 1)
	if err != nil {
		b.Fatal(err)
	}
	points := make([]engine.Point, 0, ds.Len())
	for i := range ds.Len() {
		points = append(points, ds.Point(i))
	}
	for _, c := range []struct {
		name string
		set  func(*seriesIndex, *engine.Point) *tagSet
	}{
		{"cached", (*seriesIndex).set},
		{"identity-key", (*seriesIndex).find},
	} {
		b.Run(c.name, func(b *testing.B) {
			var x seriesIndex
			for i := range points[:ds.Devices] {
				x.field(x.set(&points[i]), &points[i], 0) // every series known
			}
			b.ReportAllocs()
			for b.Loop() {
				for i := range points {
					p := &points[i]
					x.field(c.set(&x, p), p, 0)
				}
			}
			b.ReportMetric(float64(b.N*len(points))/b.Elapsed().Seconds(), "points/s")
		})
	}
}
