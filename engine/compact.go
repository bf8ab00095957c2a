package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/stratadb/strata/compaction"
	"github.com/stratadb/strata/internal/manifest"
	"github.com/stratadb/strata/segment"
)

// Compact runs compaction until the policy finds no work left: L0 below its
// trigger, every level within its target, expired data and applied
// tombstones purged. Writes continue meanwhile. Close stops it within one
// block of merging, leaving the database as it was before the compaction
// that was running; Compact then returns an error wrapping ErrClosed.
func (db *DB) Compact() error {
	if err := db.checkOpen(); err != nil {
		return err
	}
	if err := db.checkWritable(); err != nil {
		return err
	}
	for {
		did, err := db.compactOnce()
		if err != nil {
			if db.closed.Load() && errors.Is(err, context.Canceled) {
				// Close cancelled it: the merge's outputs are removed and
				// the manifest still names its inputs.
				return fmt.Errorf("%w: compaction stopped: %w", ErrClosed, err)
			}
			return err
		}
		if !did {
			return nil
		}
		if err := db.checkOpen(); err != nil {
			return err
		}
	}
}

// maybeScheduleCompaction wakes the background compactor.
func (db *DB) maybeScheduleCompaction() {
	if db.opts.DisableBackgroundCompaction {
		return
	}
	select {
	case db.compactCh <- struct{}{}:
	default:
	}
}

// compactionRetries is how many times in a row background compaction may
// fail (waiting longer each time) before its error stops writes: a writer
// stalled on L0 must not wait for a compaction that never succeeds.
const compactionRetries = 3

// compactLoop runs compactions in the background until the DB closes.
func (db *DB) compactLoop() {
	failures := 0
	for {
		select {
		case <-db.bgCtx.Done():
			return
		case <-db.compactCh:
		}
		for db.bgCtx.Err() == nil {
			did, err := db.compactOnce()
			if err == nil {
				failures = 0
				if !did {
					break
				}
				continue
			}
			if db.bgCtx.Err() != nil || errors.Is(err, ErrClosed) {
				return // closing: not a failure
			}
			failures++
			db.logger.Error("background compaction failed", "err", err, "attempt", failures)
			if failures >= compactionRetries {
				db.mu.Lock()
				if db.mu.bgErr == nil {
					db.mu.bgErr = fmt.Errorf("compaction: %w", err)
				}
				db.mu.cond.Broadcast()
				db.mu.Unlock()
				return
			}
			backoff := time.NewTimer(time.Duration(failures*failures) * 100 * time.Millisecond)
			select {
			case <-db.bgCtx.Done():
				backoff.Stop()
				return
			case <-backoff.C:
			}
		}
	}
}

// compactOnce picks and runs one compaction. It reports whether it did any.
func (db *DB) compactOnce() (bool, error) {
	db.compactMu.Lock()
	defer db.compactMu.Unlock()
	if db.closed.Load() {
		return false, ErrClosed
	}

	db.mu.Lock()
	v := db.mu.v
	if v == nil {
		db.mu.Unlock()
		return false, ErrClosed
	}
	v.Ref()
	// Only published tombstones: an unpublished delete may still fail.
	tombs := tombstonesAsOf(db.mu.tombstones, db.vis.published.Load())
	db.mu.Unlock()
	defer db.unrefVersion(v)
	if hook := db.testAfterCompactionSnapshot; hook != nil {
		hook()
	}

	cuts := db.cutoffs()
	cutoff := cuts.base
	budget := db.budgetFloor(v, 0) // math.MinInt64 within the budget (budget.go)
	cutoff = max(cutoff, budget)
	levels := infos(v)
	byNum := make(map[uint64]*segHandle)
	for l, level := range v.Levels {
		for i, h := range level {
			byNum[h.FileNum] = h
			levels[l][i].Tombstoned = db.pendingTombstone(h, tombs) != math.MaxUint64
		}
	}
	plan := db.policy.Pick(levels, cutoff)
	if plan != nil && plan.Kind == compaction.PlanMerge && db.opts.MaxDiskBytes > 0 {
		// The merge's outputs sit beside its inputs until it ends: when
		// that would pass the budget, drop older data first.
		var in int64
		for _, s := range plan.Inputs {
			in += s.Size
		}
		if b := db.budgetFloor(v, in); b > cutoff {
			budget, cutoff = b, b
			plan = db.policy.Pick(levels, cutoff)
		}
		// And cap the merge's outputs by the room left (budget_peak.go).
		if plan != nil && plan.Kind == compaction.PlanMerge {
			if b := db.budgetMergeFloor(v, plan.Inputs, cutoff); b > cutoff {
				budget, cutoff = b, b
				plan = db.policy.Pick(levels, cutoff)
			}
		}
	}
	if plan == nil && budget != math.MinInt64 {
		// Over the budget, with its floor inside segments that are not
		// mostly expired: rewrite them anyway.
		plan = db.policy.PickBelow(levels, budget)
		if plan != nil && plan.Kind == compaction.PlanMerge {
			if b := db.budgetMergeFloor(v, plan.Inputs, cutoff); b > cutoff {
				budget, cutoff = b, b
				if p := db.policy.Pick(levels, cutoff); p != nil {
					plan = p
				}
			}
		}
	}
	if plan == nil {
		// Retention rules: rewrite a bottom-most segment that they have
		// expired enough of (rules.go).
		if num, ok := db.ruleExpired(v, cuts); ok {
			for l := range levels {
				for i := range levels[l] {
					levels[l][i].Tombstoned = levels[l][i].Tombstoned || levels[l][i].FileNum == num
				}
			}
			plan = db.policy.Pick(levels, cutoff)
		}
	}
	if plan == nil {
		// Rollups: rewrite a bottom-most segment holding data old enough
		// to roll up (rollup.go).
		if num, ok := db.rollupDueSegment(v, cuts.now); ok {
			markForRewrite(levels, num)
			plan = db.policy.Pick(levels, cutoff)
		}
	}
	if plan == nil {
		return false, nil
	}
	start := time.Now()
	inputs := make([]*segHandle, len(plan.Inputs))
	for i, in := range plan.Inputs {
		inputs[i] = byNum[in.FileNum]
		if inputs[i] == nil {
			return false, fmt.Errorf("compaction plan names unknown segment %d", in.FileNum)
		}
	}
	removed := make(map[*segHandle]bool, len(inputs))
	for _, h := range inputs {
		removed[h] = true
	}

	var outputs []*segHandle
	var st compaction.MergeStats
	if plan.Kind == compaction.PlanMerge {
		// The output has applied every tombstone of the snapshot (each input
		// drops those above its own mark) and whatever every input had
		// applied: the least of the inputs' marks. Not the greatest: a mark
		// raised after the snapshot speaks only for its own input, and a
		// newer delete below it may still apply to the other inputs' data.
		var snapMax uint64
		for _, t := range tombs {
			snapMax = max(snapMax, t.seq)
		}
		inputsMin := uint64(math.MaxUint64)
		// Below a series' rule cutoff, only where nothing older is left
		// to show again (rules.go).
		var rules func(key []byte) []compaction.TimeRange
		if bottomMost(v, inputs) {
			rules = db.ruleDrop(cuts)
		}
		cin := make([]compaction.Input, len(inputs))
		series := 0 // at most the output's series: sizes its buffers
		for i, h := range inputs {
			series += h.Reader.NumSeries()
			applied := h.TombApplied.Load()
			inputsMin = min(inputsMin, applied)
			cin[i] = compaction.Input{Reader: h.Reader, Drop: joinDrops(db.dropFunc(applied, tombs), rules)}
		}
		tombApplied := max(snapMax, inputsMin)
		ctx := db.bgCtx
		if wrap := db.testCompactionContext; wrap != nil {
			ctx = wrap(ctx)
		}
		metas, mst, err := compaction.Merge(ctx, cin, compaction.MergeOptions{
			MinTime:            cutoff,
			TargetSegmentBytes: db.opts.TargetSegmentBytes,
			BlockSamples:       db.opts.BlockSamples,
			FS:                 db.fs,
			Rollup:             db.rollupFunc(cuts.now, db.rollupLimit(v, inputs)),
			Yield:              func() { db.yieldToFlush(ctx) },
			NewOutput: func() (*segment.Writer, error) {
				path := filepath.Join(db.dir, segName(db.files.Alloc()))
				return segment.Create(path, segment.WriterOptions{FS: db.fs, BlockSamples: db.opts.BlockSamples, Series: series})
			},
		})
		if err != nil {
			return false, fmt.Errorf("compact: %w", err)
		}
		st = mst
		for _, m := range metas {
			// Lazily: the index is read when a read first needs it.
			r, err := segment.OpenLazy(db.fs, m.Path, m)
			if err == nil {
				num, _ := parseSegName(filepath.Base(m.Path))
				outputs = append(outputs, manifest.NewHandle(num, plan.OutputLevel, tombApplied, r))
				continue
			}
			for _, h := range outputs {
				h.Reader.Close()
			}
			for _, m := range metas {
				db.fs.Remove(m.Path)
			}
			return false, fmt.Errorf("open compaction output: %w", err)
		}
	}

	if hook := db.testBeforeCompactionApply; hook != nil {
		hook()
	}
	// Dropping expired data, by a whole file or in a merge, may uncover an
	// older value of the same (series, time) left in another segment: the
	// expiry floor rises to the cutoff in the same edit, so nothing older
	// ever shows again.
	err := db.logAndApply(func(levels *[maxLevels][]*segHandle) {
		for l := range levels {
			levels[l] = slices.DeleteFunc(levels[l], func(h *segHandle) bool { return removed[h] })
		}
		for _, h := range outputs {
			levels[h.Level] = append(levels[h.Level], h)
		}
	}, nil, cutoff)
	if err != nil {
		// Outputs stay on disk: the manifest may name them (see flush).
		for _, h := range outputs {
			h.Reader.Close()
		}
		return false, err
	}
	d := time.Since(start)
	db.st.compactions.Add(1)
	db.st.compactionNanos.Add(int64(d))
	db.st.compactionBytesRead.Add(st.BytesRead)
	db.st.compactionBytesWritten.Add(st.BytesWritten)
	if st.SamplesRolledUp > 0 || st.RollupsCascaded > 0 {
		db.st.rollupCompactions.Add(1)
	}
	db.st.samplesRolledUp.Add(st.SamplesRolledUp)
	db.st.rollupBucketsWritten.Add(st.RollupsOut)
	db.st.rollupBucketsCascaded.Add(st.RollupsCascaded)
	db.logger.Debug("compacted", "reason", plan.Reason, "level", plan.Level, "output_level", plan.OutputLevel,
		"inputs", len(inputs), "outputs", len(outputs), "bytes_written", st.BytesWritten, "took", d)
	return true, nil
}

// infos describes v's segments for the compaction policy.
func infos(v *version) [][]compaction.SegmentInfo {
	levels := make([][]compaction.SegmentInfo, maxLevels)
	for l, level := range v.Levels {
		for _, h := range level {
			levels[l] = append(levels[l], compaction.SegmentInfo{
				FileNum: h.FileNum, Level: l, Size: h.Meta.Size,
				FirstKey: h.Meta.FirstKey, LastKey: h.Meta.LastKey,
				MinTime: h.Meta.MinTime, MaxTime: h.Meta.MaxTime,
			})
		}
	}
	return levels
}

// yieldToFlush pauses a compaction while writers are stalled on a full
// queue of memtables waiting to flush, unless L0 has reached the depth at
// which writes are slowed (then compacting it is what lets them go on):
// the flush that releases the writers gets the cores first, where there
// are few. It returns once no writer waits on a flush, L0 is that deep, a
// background error stopped the flushes, the database is closing, or ctx
// (the compaction's) is done.
func (db *DB) yieldToFlush(ctx context.Context) {
	db.mu.Lock()
	defer db.mu.Unlock()
	var stop func() bool
	for db.mu.flushStalls > 0 && !db.mu.closing && db.mu.bgErr == nil && ctx.Err() == nil && !l0Deep(db.opts, len(db.mu.v.Levels[0])) {
		if stop == nil {
			// A cancelled ctx wakes the wait (it may already be: then
			// the broadcast comes as soon as Wait releases the lock).
			stop = context.AfterFunc(ctx, func() {
				db.mu.Lock()
				db.mu.cond.Broadcast()
				db.mu.Unlock()
			})
			defer stop()
			db.st.compactionYields.Add(1) // one pause, however many wakeups it waits through
		}
		db.mu.cond.Wait()
	}
}

// l0Deep reports whether L0 holds enough segments (half way from the
// compaction trigger to the stop) that writes are slowed for it.
func l0Deep(o *Options, nl0 int) bool {
	return nl0 >= (o.L0CompactionTrigger+o.L0StopWritesTrigger)/2
}
