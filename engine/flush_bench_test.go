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
func BenchmarkFlush200k(b *testing.B) {
	const series, steps = 200_000, 10
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
