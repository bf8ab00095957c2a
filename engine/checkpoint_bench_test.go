package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// BenchmarkCheckpointStall writes 100,000 points/s (a batch of 1,000 every
// 10 ms, SyncAlways) while a checkpoint of the database is taken, and
// reports the slowest Write seen during the checkpoint (max-write-ms) and
// the checkpoint's own time:
//
//	go test -run '^$' -bench CheckpointStall -benchtime 5x ./engine/
func BenchmarkCheckpointStall(b *testing.B) {
	dir := b.TempDir()
	opts := quietOptions()
	opts.Sync = SyncAlways
	opts.MemTableBytes = 4 << 20 // flushes happen during the run
	db := openDB(b, filepath.Join(dir, "db"), opts)
	batch := func(t0 int64) []Point {
		pts := make([]Point, 1000)
		for i := range pts {
			pts[i] = Point{Measurement: "sensor", Tags: []Tag{{Key: "device_id", Value: benchDevice(i)}},
				Fields: []Field{{Key: "temperature", Value: Float(float64(i))}}, Time: t0}
		}
		return pts
	}
	// A database of 2M points, in segments and in the memtable.
	var ts int64
	for ; ts < 2000; ts++ {
		if err := db.Write(batch(ts)); err != nil {
			b.Fatal(err)
		}
	}
	var worst, ckpt time.Duration
	n := 0
	for b.Loop() {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var maxWrite time.Duration
		wg.Go(func() {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				start := time.Now()
				if err := db.Write(batch(ts)); err != nil {
					b.Error(err)
					return
				}
				ts++
				maxWrite = max(maxWrite, time.Since(start))
			}
		})
		start := time.Now()
		if _, err := db.Checkpoint(context.Background(), filepath.Join(dir, "ckpt", benchDevice(n))); err != nil {
			b.Fatal(err)
		}
		ckpt += time.Since(start)
		close(stop)
		wg.Wait()
		worst = max(worst, maxWrite)
		n++
	}
	b.ReportMetric(float64(worst)/1e6, "max-write-ms")
	b.ReportMetric(float64(ckpt)/1e6/float64(n), "checkpoint-ms")
}

func benchDevice(i int) string { return fmt.Sprintf("dev-%04d", i) }
