package engine

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/segment"
)

// sameAnswers checks that a and b answer raw reads of every model series,
// Last, and aggregates on bucket edges over [from, to) the same (a few:
// checkRollupAggs checks them all against the raw database).
func sameAnswers(t *testing.T, a, b *DB, from, to int64, where string) {
	t.Helper()
	ctx := context.Background()
	for _, meas := range []string{"m", "n"} {
		raw := Query{Selector: Selector{Measurement: meas, Start: minTime, End: maxTime}}
		if got, want := mustQuery(t, a, raw), mustQuery(t, b, raw); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: raw read of %s:\n got %s\nwant %s", where, meas, formatSeries(got), formatSeries(want))
		}
		got, err := a.Last(ctx, raw.Selector)
		if err != nil {
			t.Fatal(err)
		}
		want, err := b.Last(ctx, raw.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: last of %s:\n got %s\nwant %s", where, meas, formatSeries(got), formatSeries(want))
		}
	}
	for _, agg := range []Aggregate{AggCount, AggSum, AggMean, AggMin, AggLast} {
		for _, every := range []int64{0, int64(10 * time.Minute), hourNs} {
			for _, meas := range []string{"m", "n"} {
				q := Query{Selector: Selector{Measurement: meas, Start: from, End: to}, Agg: agg, Every: every, GroupBy: []string{"host"}}
				if got, want := mustQuery(t, a, q), mustQuery(t, b, q); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: %s:\n got %s\nwant %s", where, formatQuery(q), formatSeries(got), formatSeries(want))
				}
			}
		}
	}
}

// TestCheckpointRollups takes checkpoints of a database with rollup rules
// in the middle of a compaction that rolls up (from inside the merge, and
// once its outputs are written, before they replace its inputs) and after
// it. Each opens, holds the buckets or the raw samples it was taken with,
// whole (rollupProblem), and answers aggregates like a database of the raw
// samples; the one taken after answers every read like the source and
// holds the same buckets. A restore of it (verify, then checkpoint, as
// strata restore does) does too, and a checkpoint taken mid-compaction
// rolls up when compacted itself.
func TestCheckpointRollups(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 25))
	base := rollupModelBase
	_, opts := rollupClockOptions()
	ropts := *opts
	opts.Rollups = rollupRules()
	db := openDB(t, t.TempDir(), opts)
	raw := openDB(t, t.TempDir(), &ropts)
	m := rollupModel{}
	from := base - 12*hourNs
	m.writeSpan(t, r, from, base, db, raw)
	mustFlush(t, db)
	mustFlush(t, raw)

	ctx := context.Background()
	cps := t.TempDir()
	mid, beforeApply, after := filepath.Join(cps, "mid"), filepath.Join(cps, "apply"), filepath.Join(cps, "after")
	checkpoint := func(dir string) {
		t.Helper()
		if _, err := db.Checkpoint(ctx, dir); err != nil {
			t.Fatalf("checkpoint %s: %v", filepath.Base(dir), err)
		}
	}
	var polls atomic.Int64
	db.testCompactionContext = func(ctx context.Context) context.Context {
		return &pollCtx{Context: ctx, poll: func() {
			if polls.Add(1) == 10 {
				checkpoint(mid)
			}
		}}
	}
	var applies atomic.Int64
	db.testBeforeCompactionApply = func() {
		if applies.Add(1) == 1 {
			checkpoint(beforeApply)
		}
	}
	mustCompact(t, db)
	db.testCompactionContext, db.testBeforeCompactionApply = nil, nil
	if st := db.Stats(); st.Compactions != 1 || st.RollupCompactions != 1 {
		t.Fatalf("%d compactions, %d rolling up: want the one, so that both checkpoints were taken inside it", st.Compactions, st.RollupCompactions)
	}
	if polls.Load() < 10 {
		t.Fatalf("the merge polled its context %d times: no checkpoint in the middle of it", polls.Load())
	}
	srcBuckets := checkRollups(t, db, m, "source")
	if len(srcBuckets) == 0 {
		t.Fatal("the compaction rolled up nothing")
	}
	checkpoint(after)

	open := func(dir string) (*DB, map[string][]segment.Rollup) {
		t.Helper()
		cp := openDB(t, dir, opts)
		b := checkRollups(t, cp, m, filepath.Base(dir))
		checkRollupAggs(t, cp, raw, from, base, filepath.Base(dir))
		return cp, b
	}
	for _, dir := range []string{mid, beforeApply} {
		cp, b := open(dir)
		if len(b) != 0 {
			t.Fatalf("%s: %d series with buckets in a checkpoint taken before the compaction's edit", filepath.Base(dir), len(b))
		}
		// It is a database like the source was: compacted, it rolls up.
		mustCompact(t, cp)
		if b := checkRollups(t, cp, m, filepath.Base(dir)+" compacted"); !reflect.DeepEqual(b, srcBuckets) {
			t.Fatalf("%s compacted: buckets differ from the source's", filepath.Base(dir))
		}
		sameAnswers(t, cp, db, from, base, filepath.Base(dir)+" compacted")
		cp.Close()
	}
	cp, b := open(after)
	if !reflect.DeepEqual(b, srcBuckets) {
		t.Fatal("after: buckets differ from the source's")
	}
	sameAnswers(t, cp, db, from, base, "after")
	cp.Close()

	// Restore, as strata restore does: a read-only open of the backup,
	// Verify (every rollup block against its checksum), a checkpoint.
	ro := *opts
	ro.ReadOnly = true
	bk := openDB(t, after, &ro)
	rep, err := bk.Verify(ctx)
	if err != nil {
		t.Fatalf("verify the checkpoint: %v", err)
	}
	restored := filepath.Join(cps, "restored")
	if _, err := bk.Checkpoint(ctx, restored); err != nil {
		t.Fatalf("restore: %v", err)
	}
	bk.Close()
	rdb, b := open(restored)
	if !reflect.DeepEqual(b, srcBuckets) || rep.Segments == 0 {
		t.Fatalf("restored: buckets differ from the source's (verified %d segments)", rep.Segments)
	}
	sameAnswers(t, rdb, db, from, base, "restored")
}
