package engine

import "testing"

// BenchmarkFlush200k times Close alone after 200,000 series of 10 points
// each were written (untimed) into a fresh database: the flush of the
// memtable to a segment that Close waits for.
func BenchmarkFlush200k(b *testing.B) {
	const series, steps = 200_000, 10
	batches := iotBatches(series, steps, benchBatch)
	b.ReportAllocs()
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
		b.StartTimer()
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
