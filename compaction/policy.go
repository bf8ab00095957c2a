package compaction

import (
	"bytes"
	"fmt"
	"math"
	"slices"

	"github.com/stratadb/strata/internal/base"
)

// Policy defaults, used for zero (or out of range) fields.
const (
	DefaultL0Trigger       = 4
	DefaultMultiplier      = 10
	DefaultL1TargetBytes   = 64 << 20
	DefaultMaxLevels       = 7
	DefaultExpiredFraction = 0.25
)

// Plan reasons.
const (
	ReasonL0Count    = "l0-count"
	ReasonLevelSize  = "level-size"
	ReasonExpired    = "expired"
	ReasonTombstones = "tombstones"
)

// PlanKind says how the engine carries a Plan out.
type PlanKind uint8

const (
	// PlanMerge merges Plan.Inputs (see Merge) into new segments at
	// OutputLevel, then replaces the inputs with them in one manifest edit.
	PlanMerge PlanKind = iota + 1
	// PlanDropExpired removes Plan.Inputs without reading them: every sample
	// in them is older than the retention cutoff.
	PlanDropExpired
)

func (k PlanKind) String() string {
	switch k {
	case PlanMerge:
		return "merge"
	case PlanDropExpired:
		return "drop-expired"
	}
	return fmt.Sprintf("PlanKind(%d)", uint8(k))
}

// Policy is leveled compaction. L0 holds fresh flushes (they may overlap).
// Levels >= 1 hold segments whose [FirstKey, LastKey] ranges do not overlap
// within the level, each level about Multiplier x the one above. Zero fields
// take the defaults; the zero Policy is valid.
type Policy struct {
	L0Trigger     int   // L0 segment count that starts an L0->L1 compaction; default 4
	Multiplier    int   // level n+1 target / level n target; default 10; at least 2
	L1TargetBytes int64 // default 64 MiB
	MaxLevels     int   // default 7 (L0..L6); at least 2
	// ExpiredFraction is the share of a bottom-level segment's time span
	// that must be older than the retention cutoff before Pick rewrites the
	// segment to reclaim the space; default 0.25. Without such a threshold
	// a cutoff that moves every second would keep the whole bottom level in
	// rewrite. Queries hide expired samples either way.
	ExpiredFraction float64
}

// Validate reports a field that is neither zero (the default) nor usable.
// The engine validates its options with it, so a value is either accepted
// and used or rejected: never silently replaced.
func (p Policy) Validate() error {
	switch {
	case p.L0Trigger < 0:
		return fmt.Errorf("%w: L0Trigger %d is negative", base.ErrInvalid, p.L0Trigger)
	case p.Multiplier < 0 || p.Multiplier == 1:
		return fmt.Errorf("%w: level multiplier %d is below 2", base.ErrInvalid, p.Multiplier)
	case p.L1TargetBytes < 0:
		return fmt.Errorf("%w: L1 target %d is negative", base.ErrInvalid, p.L1TargetBytes)
	case p.MaxLevels < 0 || p.MaxLevels == 1:
		return fmt.Errorf("%w: %d levels is below 2", base.ErrInvalid, p.MaxLevels)
	case !(p.ExpiredFraction >= 0 && p.ExpiredFraction <= 1): // NaN too
		return fmt.Errorf("%w: expired fraction %v outside [0, 1]", base.ErrInvalid, p.ExpiredFraction)
	}
	return nil
}

// withDefaults replaces zero fields with the defaults. Invalid fields (see
// Validate) are replaced too, so that Pick never loops or divides by a
// useless multiplier even when a caller skipped Validate.
func (p Policy) withDefaults() Policy {
	if p.L0Trigger <= 0 {
		p.L0Trigger = DefaultL0Trigger
	}
	if p.Multiplier < 2 {
		p.Multiplier = DefaultMultiplier
	}
	if p.L1TargetBytes <= 0 {
		p.L1TargetBytes = DefaultL1TargetBytes
	}
	if p.MaxLevels < 2 {
		p.MaxLevels = DefaultMaxLevels
	}
	if !(p.ExpiredFraction > 0) { // also NaN
		p.ExpiredFraction = DefaultExpiredFraction
	}
	return p
}

// SegmentInfo is what Pick needs to know about a live segment.
type SegmentInfo struct {
	FileNum           uint64 // flush/creation order: higher = newer within L0
	Level             int
	Size              int64
	FirstKey, LastKey []byte
	MinTime, MaxTime  int64
	Tombstoned        bool // the engine says a live tombstone covers data in it
}

// Plan is one unit of compaction work.
type Plan struct {
	Kind        PlanKind
	Level       int // input level
	OutputLevel int
	// Inputs are ordered OLDEST to NEWEST for a merge: the overlapping
	// segments of OutputLevel first (by key), then those of Level (L0 by
	// FileNum ascending). Pass them to Merge in this order.
	Inputs []SegmentInfo
	Reason string // ReasonL0Count, ReasonLevelSize, ReasonExpired or ReasonTombstones
}

func (pl *Plan) String() string {
	return fmt.Sprintf("%s L%d->L%d %s, %d inputs", pl.Kind, pl.Level, pl.OutputLevel, pl.Reason, len(pl.Inputs))
}

// LevelTarget returns the size target of level: L1TargetBytes for L1 and
// Multiplier times more per level below, saturating at math.MaxInt64. L0
// is governed by its segment count and has target 0. The last level's target
// is reported too, but Pick never pushes data out of the last level.
func (p Policy) LevelTarget(level int) int64 {
	p = p.withDefaults()
	if level <= 0 {
		return 0
	}
	t := p.L1TargetBytes
	for range level - 1 {
		if t > math.MaxInt64/int64(p.Multiplier) {
			return math.MaxInt64
		}
		t *= int64(p.Multiplier)
	}
	return t
}

// PendingBytes estimates the compaction debt: the bytes by which levels
// 1..last-1 exceed their targets, plus all of L0 when it has reached
// L0Trigger.
func (p Policy) PendingBytes(levels [][]SegmentInfo) int64 {
	p = p.withDefaults()
	var n int64
	if len(levels) > 0 && len(levels[0]) >= p.L0Trigger {
		n += levelBytes(levels[0])
	}
	last := p.lastLevel(levels)
	for l := 1; l < last && l < len(levels); l++ {
		n += max(0, levelBytes(levels[l])-p.LevelTarget(l))
	}
	return n
}

// lastLevel is the deepest level: data there is never pushed further down.
func (p Policy) lastLevel(levels [][]SegmentInfo) int {
	return max(p.MaxLevels, len(levels)) - 1
}

// Pick returns the most urgent work, or nil when there is none. levels[l]
// lists the live segments of level l in any order; missing levels are empty.
// minTime is the retention cutoff (math.MinInt64 = none).
//
// Order:
//  1. segments entirely expired (MaxTime < minTime) -> PlanDropExpired, all
//     such segments of the first level that has any;
//  2. len(L0) >= L0Trigger -> all L0 segments plus every L1 segment that
//     overlaps their combined key range -> L1;
//  3. the level (1..last-1) whose size / LevelTarget is largest and > 1 ->
//     its oldest segment plus the overlapping segments of the next level;
//  4. tombstoned data: in L0 -> all of L0 into L1 as in 2; in a level >= 1
//     -> the oldest tombstoned segment, rewritten in place;
//  5. at the last non-empty level, the oldest segment with at least
//     ExpiredFraction of its time span before minTime, rewritten in place.
//
// Pick never returns a plan whose outputs could overlap a segment left in
// a level >= 1, provided the outputs stay within the inputs' key range (as
// Merge's do).
func (p Policy) Pick(levels [][]SegmentInfo, minTime int64) *Plan {
	p = p.withDefaults()
	level := func(l int) []SegmentInfo {
		if l < len(levels) {
			return levels[l]
		}
		return nil
	}
	last := p.lastLevel(levels)

	if minTime != math.MinInt64 {
		for l, segs := range levels {
			var in []SegmentInfo
			for _, s := range segs {
				if s.MaxTime < minTime {
					in = append(in, s)
				}
			}
			if len(in) > 0 {
				slices.SortFunc(in, cmpFileNum)
				return &Plan{Kind: PlanDropExpired, Level: l, OutputLevel: l, Inputs: in, Reason: ReasonExpired}
			}
		}
	}

	if len(level(0)) >= p.L0Trigger {
		return pushL0(level(0), level(1), ReasonL0Count)
	}

	best, bestScore := 0, 1.0
	for l := 1; l < last; l++ {
		if score := float64(levelBytes(level(l))) / float64(p.LevelTarget(l)); score > bestScore {
			best, bestScore = l, score
		}
	}
	if best > 0 {
		seg, _ := oldest(level(best), func(SegmentInfo) bool { return true })
		return pushDown(best, seg, level(best+1), ReasonLevelSize)
	}

	if slices.ContainsFunc(level(0), func(s SegmentInfo) bool { return s.Tombstoned }) {
		return pushL0(level(0), level(1), ReasonTombstones)
	}
	for l := 1; l < len(levels); l++ {
		if seg, ok := oldest(levels[l], func(s SegmentInfo) bool { return s.Tombstoned }); ok {
			return rewrite(l, seg, ReasonTombstones)
		}
	}

	if minTime != math.MinInt64 {
		for l := len(levels) - 1; l >= 1; l-- {
			if len(levels[l]) == 0 {
				continue
			}
			if seg, ok := oldest(levels[l], func(s SegmentInfo) bool { return p.mostlyExpired(s, minTime) }); ok {
				return rewrite(l, seg, ReasonExpired)
			}
			break
		}
	}
	return nil
}

// mostlyExpired reports whether at least ExpiredFraction of s's time span
// lies before minTime.
func (p Policy) mostlyExpired(s SegmentInfo, minTime int64) bool {
	if s.MinTime >= minTime {
		return false
	}
	span := float64(s.MaxTime) - float64(s.MinTime) + 1
	return (float64(minTime)-float64(s.MinTime))/span >= p.ExpiredFraction
}

// pushL0 merges all of L0 with the overlapping part of L1.
func pushL0(l0, l1 []SegmentInfo, reason string) *Plan {
	in := slices.Clone(l0)
	slices.SortFunc(in, cmpFileNum)
	lo, hi := in[0].FirstKey, in[0].LastKey
	for _, s := range in[1:] {
		if bytes.Compare(s.FirstKey, lo) < 0 {
			lo = s.FirstKey
		}
		if bytes.Compare(s.LastKey, hi) > 0 {
			hi = s.LastKey
		}
	}
	return &Plan{Kind: PlanMerge, Level: 0, OutputLevel: 1, Inputs: append(overlapping(l1, lo, hi), in...), Reason: reason}
}

// pushDown merges seg of level l with the overlapping part of level l+1.
func pushDown(l int, seg SegmentInfo, next []SegmentInfo, reason string) *Plan {
	in := append(overlapping(next, seg.FirstKey, seg.LastKey), seg)
	return &Plan{Kind: PlanMerge, Level: l, OutputLevel: l + 1, Inputs: in, Reason: reason}
}

// rewrite merges seg alone back into its level.
func rewrite(l int, seg SegmentInfo, reason string) *Plan {
	return &Plan{Kind: PlanMerge, Level: l, OutputLevel: l, Inputs: []SegmentInfo{seg}, Reason: reason}
}

// overlapping returns the segments of segs whose key range meets [lo, hi],
// sorted by FirstKey.
func overlapping(segs []SegmentInfo, lo, hi []byte) []SegmentInfo {
	var out []SegmentInfo
	for _, s := range segs {
		if bytes.Compare(s.FirstKey, hi) <= 0 && bytes.Compare(lo, s.LastKey) <= 0 {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, cmpFirstKey)
	return out
}

// oldest returns the segment with the lowest FileNum among those for which
// ok is true.
func oldest(segs []SegmentInfo, ok func(SegmentInfo) bool) (SegmentInfo, bool) {
	var best SegmentInfo
	found := false
	for _, s := range segs {
		if ok(s) && (!found || s.FileNum < best.FileNum) {
			best, found = s, true
		}
	}
	return best, found
}

func levelBytes(segs []SegmentInfo) int64 {
	var n int64
	for _, s := range segs {
		n += s.Size
	}
	return n
}

func cmpFileNum(a, b SegmentInfo) int {
	switch {
	case a.FileNum < b.FileNum:
		return -1
	case a.FileNum > b.FileNum:
		return 1
	}
	return 0
}

func cmpFirstKey(a, b SegmentInfo) int { return bytes.Compare(a.FirstKey, b.FirstKey) }

// PickBelow returns a merge that drops data older than minTime when Pick
// finds none: the engine uses it to enforce a disk budget, whose floor may
// lie inside segments that are not yet mostly expired. L0 segments holding
// such data go down to L1 with all of L0 (an L0 segment cannot be rewritten
// in place without changing its rank among the others); otherwise the
// oldest segment of a level >= 1 holding such data is rewritten in place.
// It returns nil when no segment holds a sample before minTime.
func (p Policy) PickBelow(levels [][]SegmentInfo, minTime int64) *Plan {
	if minTime == math.MinInt64 {
		return nil
	}
	below := func(s SegmentInfo) bool { return s.MinTime < minTime }
	if len(levels) > 0 && slices.ContainsFunc(levels[0], below) {
		var l1 []SegmentInfo
		if len(levels) > 1 {
			l1 = levels[1]
		}
		return pushL0(levels[0], l1, ReasonExpired)
	}
	for l := 1; l < len(levels); l++ {
		if seg, ok := oldest(levels[l], below); ok {
			return rewrite(l, seg, ReasonExpired)
		}
	}
	return nil
}
