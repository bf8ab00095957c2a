package engine

import (
	"runtime"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/testutil"
)

// BenchmarkFlush200k times Close alone after 200,000 series of 10 points
// each were written (untimed) into a fresh database: the flush of the
// memtable to a segment that Close waits for. A garbage collection runs
// before the timer starts, so that none started by the writes (marking
// their heap of hundreds of megabytes) is charged to Close. It also
// reports the CPU time of the process during Close (every goroutine's),
// which other load on the machine disturbs less than the wall-clock time.
func BenchmarkFlush200k(b *testing.B) { benchmarkClose(b, 200_000, 10) }

// BenchmarkFlush1k is BenchmarkFlush200k at the baseline's shape: 1,000
// series of 1,000 points, one long block run per series.
func BenchmarkFlush1k(b *testing.B) { benchmarkClose(b, 1_000, 1_000) }

func benchmarkClose(b *testing.B, series, steps int) {
	batches := iotBatches(series, steps, benchBatch)
	b.ReportAllocs()
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		db, err := Open(b.TempDir(), benchOptions())
		if err != nil {
			b.Fatal(err)
		}
		for _, batch := range batches {
			if err := db.Write(batch); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		b.StartTimer()
		cpu0 := testutil.CPUTime()
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		cpu += testutil.CPUTime() - cpu0
	}
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	}
}
