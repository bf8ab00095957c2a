package engine

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// TestExpiryNeverUndoesOverwrite: value A at time t sits in segment S1
// beside newer data; value B overwrites t in segment S2. Once t expires,
// compaction drops S2 whole while A survives in S1. Moving the clock back,
// or reopening with a longer Retention, must not show A: an overwritten
// value never comes back. Every path that drops data by retention (a whole
// file, or samples in a merge) is covered: the policy is run with L0 either
// dropped whole or merged.
func TestExpiryNeverUndoesOverwrite(t *testing.T) {
	for _, merge := range []bool{false, true} {
		t.Run(fmt.Sprint("merge=", merge), func(t *testing.T) {
			const hour = int64(time.Hour)
			base := int64(1_000 * time.Hour)
			var now atomic.Int64
			now.Store(base)
			opts := quietOptions()
			opts.DisableBackgroundCompaction = true
			opts.Retention = time.Hour
			opts.Now = func() time.Time { return time.Unix(0, now.Load()) }
			if merge {
				opts.L0CompactionTrigger = 2 // S1 and S2 merge into L1 and B is dropped there
			}
			dir := t.TempDir()
			db := openDB(t, dir, opts)
			ts := base - hour/2
			mustWrite(t, db, pt("m", nil, "v", String("A"), ts), pt("m", nil, "v", String("new"), base))
			mustFlush(t, db) // S1: A and newer data
			mustWrite(t, db, pt("m", nil, "v", String("B"), ts))
			mustFlush(t, db) // S2: B only
			if merge {
				// Something newer in a third file, so that only the
				// merge, not a whole-file drop, can remove B.
				mustWrite(t, db, pt("m", nil, "v", String("newer"), base+1))
				mustFlush(t, db)
			}

			check := func(when string) {
				t.Helper()
				for _, s := range mustQuery(t, db, rawAll("m")) {
					for _, x := range s.Samples {
						if x.Time == ts && x.Value.Str() != "B" {
							t.Fatalf("%s: time t reads %q, an overwritten value", when, x.Value.Str())
						}
					}
				}
			}
			check("before expiry")
			now.Store(base + hour) // t expires
			mustCompact(t, db)
			check("after expiry and compaction")
			now.Store(base) // the clock goes back
			check("clock moved back")
			mustCompact(t, db)
			check("clock moved back, compacted")

			longer := *opts
			longer.Retention = 1000 * time.Hour
			db = reopen(t, db, dir, &longer)
			check("reopened with a longer Retention")
			noRetention := *opts
			noRetention.Retention = 0
			db = reopen(t, db, dir, &noRetention)
			check("reopened without Retention")
			// Newer data is untouched.
			if got := samplesOf(t, mustQuery(t, db, rawAll("m"))); got[0].Value.Str() != "new" {
				t.Fatalf("newer data lost: %v", got)
			}
		})
	}
}
