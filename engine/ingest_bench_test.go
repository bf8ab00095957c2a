package engine

import (
	"log/slog"
	"testing"
)

// BenchmarkIngest10MCompaction ingests the baseline dataset ten times
// over (10,000 timestamps per device, 10M points) with background
// compaction on and a memtable small enough that flushes and compactions
// run during the ingest. It reports the ingest rate and the write
// amplification (segment bytes written by flushes and compactions over
// bytes flushed).
func BenchmarkIngest10MCompaction(b *testing.B) {
	const devices, rounds, steps = 1000, 10, 1000
	batches := iotBatches(devices, steps, 10000)
	b.ReportAllocs()
	var st Stats
	for b.Loop() {
		dir := b.TempDir()
		db, err := Open(dir, &Options{
			Sync:          SyncNever,
			MemTableBytes: 8 << 20,
			L1TargetBytes: 2 << 20,
			Logger:        slog.New(slog.DiscardHandler),
		})
		if err != nil {
			b.Fatal(err)
		}
		for r := range rounds {
			shift := int64(r) * steps * 1e9
			for _, batch := range batches {
				for i := range batch {
					batch[i].Time += shift
				}
				if err := db.Write(batch); err != nil {
					b.Fatal(err)
				}
				for i := range batch {
					batch[i].Time -= shift
				}
			}
		}
		if err := db.Compact(); err != nil {
			b.Fatal(err)
		}
		st = db.Stats()
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(devices * steps * rounds)
	b.ReportMetric(n*float64(b.N)/b.Elapsed().Seconds(), "points/s")
	b.ReportMetric(st.WriteAmplification, "write-amp")
	b.ReportMetric(float64(st.Compactions), "compactions")
	b.ReportMetric(float64(st.DiskBytes)/n, "disk-B/point")
	b.Logf("levels %v, flushes %d, flushed %d B, compaction wrote %d B, stalls %d, slowdowns %d",
		st.SegmentsPerLevel, st.Flushes, st.FlushedBytes, st.CompactionBytesWritten, st.WriteStalls, st.WriteSlowdowns)
}
