package engine

import (
	"math/rand/v2"
	"sync"
	"testing"
)

// TestDiskBudgetPeakDuringCompaction writes three times the budget with
// background flushes and compactions running, and measures the directory
// after every batch and at the moment each compaction holds the most disk:
// its outputs written, its inputs not yet removed. It must never pass 1.1x
// of the budget, and the newest data must all be there.
func TestDiskBudgetPeakDuringCompaction(t *testing.T) {
	const limit = 3 << 20
	const devices = 32
	const sec = int64(1e9)
	for _, text := range []bool{true, false} {
		dir := t.TempDir()
		opts := budgetOptions(limit)
		db, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var peak, peakAt int64
		var written int64
		measure := func() {
			n := dirBytes(t, dir)
			mu.Lock()
			if n > peak {
				peak, peakAt = n, written
			}
			mu.Unlock()
		}
		db.testBeforeCompactionApply = measure
		rng := rand.New(rand.NewPCG(5, 6))
		ts := int64(0)
		target := int64(3 * limit)
		if !text {
			target = limit // floats compress ~20x: a third of the data is plenty
		}
		for {
			for range 100 {
				mustWrite(t, db, budgetBatch(rng, devices, ts, text)...)
				ts += sec
			}
			measure()
			mu.Lock()
			written = db.Stats().FlushedBytes + db.Stats().WALBytes
			done := written >= target
			mu.Unlock()
			if done {
				break
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("text %v: wrote %d bytes over %ds; peak %d bytes (%.3fx the budget) at %d written",
			text, written, ts/sec, peak, float64(peak)/limit, peakAt)
		if peak > limit*11/10 {
			t.Fatalf("text %v: directory at %d bytes, %.3fx the budget of %d", text, peak, float64(peak)/limit, limit)
		}
		db = openDB(t, dir, opts)
		q := rawAll("sensor")
		q.Field = "v"
		for _, s := range mustQuery(t, db, q) {
			if n := len(s.Samples); n == 0 || s.Samples[n-1].Time != ts-sec {
				t.Fatalf("%s: newest sample missing", s.Key())
			}
		}
		db.Close()
	}
}
