package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
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
