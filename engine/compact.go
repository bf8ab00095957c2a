package engine

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/stratadb/strata/compaction"
	"github.com/stratadb/strata/segment"
)

// Compact runs compaction until the policy finds no work left: L0 below its
// trigger, every level within its target, expired data and applied
// tombstones purged. Writes continue meanwhile.
func (db *DB) Compact() error {
	if err := db.checkOpen(); err != nil {
		return err
	}
	for {
		did, err := db.compactOnce()
		if err != nil {
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

// compactLoop runs compactions in the background until the DB closes.
func (db *DB) compactLoop() {
	for {
		select {
		case <-db.bgCtx.Done():
			return
		case <-db.compactCh:
		}
		for db.bgCtx.Err() == nil {
			did, err := db.compactOnce()
			if err != nil {
				if db.bgCtx.Err() == nil {
					db.logger.Error("background compaction failed", "err", err)
				}
				break
			}
			if !did {
				break
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
	v.ref()
	tombs := db.mu.tombstones
	db.mu.Unlock()
	defer db.unrefVersion(v)

	cutoff := db.retentionCutoff()
	levels := infos(v)
	byNum := make(map[uint64]*segHandle)
	for l, level := range v.levels {
		for i, h := range level {
			byNum[h.fileNum] = h
			levels[l][i].Tombstoned = tombstoned(h, tombs)
		}
	}
	plan := db.policy.Pick(levels, cutoff)
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
		tombApplied := uint64(0)
		for _, t := range tombs {
			tombApplied = max(tombApplied, t.seq)
		}
		cin := make([]compaction.Input, len(inputs))
		for i, h := range inputs {
			tombApplied = max(tombApplied, h.tombApplied)
			cin[i] = compaction.Input{Reader: h.r, Drop: db.dropFunc(h.tombApplied, tombs)}
		}
		metas, mst, err := compaction.Merge(db.bgCtx, cin, compaction.MergeOptions{
			MinTime:            cutoff,
			TargetSegmentBytes: db.opts.TargetSegmentBytes,
			BlockSamples:       db.opts.BlockSamples,
			NewOutput: func() (*segment.Writer, error) {
				path := filepath.Join(db.dir, segName(db.allocFileNum()))
				return segment.Create(path, segment.WriterOptions{FS: db.fs, BlockSamples: db.opts.BlockSamples})
			},
		})
		if err != nil {
			return false, fmt.Errorf("compact: %w", err)
		}
		st = mst
		for _, m := range metas {
			r, err := segment.Open(db.fs, m.Path)
			if err == nil {
				num, _ := parseSegName(filepath.Base(m.Path))
				outputs = append(outputs, &segHandle{fileNum: num, level: plan.OutputLevel, tombApplied: tombApplied, r: r, meta: r.Meta()})
				continue
			}
			for _, h := range outputs {
				h.r.Close()
			}
			for _, m := range metas {
				db.fs.Remove(m.Path)
			}
			return false, fmt.Errorf("open compaction output: %w", err)
		}
	}

	err := db.logAndApply(func(levels *[maxLevels][]*segHandle) {
		for l := range levels {
			levels[l] = slices.DeleteFunc(levels[l], func(h *segHandle) bool { return removed[h] })
		}
		for _, h := range outputs {
			levels[h.level] = append(levels[h.level], h)
		}
	}, nil)
	if err != nil {
		// Outputs stay on disk: the manifest may name them (see flush).
		for _, h := range outputs {
			h.r.Close()
		}
		return false, err
	}
	d := time.Since(start)
	db.st.compactions.Add(1)
	db.st.compactionNanos.Add(int64(d))
	db.st.compactionBytesRead.Add(st.BytesRead)
	db.st.compactionBytesWritten.Add(st.BytesWritten)
	db.logger.Debug("compacted", "reason", plan.Reason, "level", plan.Level, "output_level", plan.OutputLevel,
		"inputs", len(inputs), "outputs", len(outputs), "bytes_written", st.BytesWritten, "took", d)
	return true, nil
}

// tombstoned reports whether a live tombstone may delete data in h.
func tombstoned(h *segHandle, tombs []tombstone) bool {
	for _, t := range tombs {
		if t.seq > h.tombApplied && t.sel.Start <= h.meta.MaxTime && t.sel.End > h.meta.MinTime {
			return true
		}
	}
	return false
}

// dropFunc returns the ranges the tombstones newer than applied delete from
// a series, for compaction.
func (db *DB) dropFunc(applied uint64, tombs []tombstone) func(key []byte) []compaction.TimeRange {
	var live []tombstone
	for _, t := range tombs {
		if t.seq > applied {
			live = append(live, t)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return func(key []byte) []compaction.TimeRange {
		db.cat.mu.RLock()
		defer db.cat.mu.RUnlock()
		id, ok := db.cat.byKey[string(key)]
		if !ok {
			return nil
		}
		var out []compaction.TimeRange
		for _, t := range live {
			if db.cat.matches(id, &t.sel) {
				out = append(out, compaction.TimeRange{Min: t.sel.Start, Max: t.sel.End - 1})
			}
		}
		return out
	}
}

// infos describes v's segments for the compaction policy.
func infos(v *version) [][]compaction.SegmentInfo {
	levels := make([][]compaction.SegmentInfo, maxLevels)
	for l, level := range v.levels {
		for _, h := range level {
			levels[l] = append(levels[l], compaction.SegmentInfo{
				FileNum: h.fileNum, Level: l, Size: h.meta.Size,
				FirstKey: h.meta.FirstKey, LastKey: h.meta.LastKey,
				MinTime: h.meta.MinTime, MaxTime: h.meta.MaxTime,
			})
		}
	}
	return levels
}
