package engine

// Downsampling (Options.Rollups, DB.SetRollups).
//
// Every rule whose selector matches a series applies to it: a series'
// rules, sorted by Every, form its cascade (e.g. 1m after 7d, 1h after
// 90d). At compaction (compaction/rollup.go), a matching float, int or
// uint series' samples older than now minus a rule's After, floored to its
// Every, become one rollup per Every-wide epoch-aligned bucket (count,
// exact sum, min, max, first, last, with their times); finer buckets older
// than a coarser rule's bound merge into its buckets. The rollups are
// written into the compaction's output segments, so they replace the raw
// samples they were made of in the one manifest edit that replaces the
// compaction's inputs: a crash at any point shows either every raw sample
// or every bucket, never both and never half.
//
// A compaction rolls up only what no data outside its inputs could still
// overlap: the bound is also capped at the oldest time of every other
// segment whose keys overlap the inputs', and of the memtables. A sample
// written later into a bucket already rolled up joins that bucket at the
// next compaction that holds both (it adds to it; it does not replace a
// sample of the bucket at the same time, which the bucket no longer
// knows).
//
// Reads (rollup_read.go) answer aggregates from the buckets and raw reads
// with each bucket's last sample.

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stratadb/strata/compaction"
	"github.com/stratadb/strata/internal/catalog"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/segment"
)

// RollupRule downsamples the series it selects. See DB.SetRollups.
type RollupRule struct {
	Measurement string    // "" = every measurement
	Matchers    []Matcher // ANDed; none = every series of the measurement
	Every       time.Duration
	After       time.Duration
}

// SetRollups replaces the downsampling rules (Options.Rollups) at run
// time. Samples of a matching float, int or uint series older than After
// are replaced, at compaction, by one rollup per Every-wide epoch-aligned
// bucket keeping count, sum, min, max, first and last (with their times).
// Every rule that matches a series applies to it, as a cascade: sorted by
// Every, each Every must be a multiple of the previous one and each After
// longer (1m after 7d, then 1h after 90d: 1m buckets older than 90d merge
// into 1h buckets). Rules with the same selector that break this fail with
// ErrInvalid; where rules of different selectors meet on one series, a
// rule that does not fit the cascade of the rules before it in the list is
// ignored for that series.
//
// Aggregate queries whose Every is a multiple of the coarsest rolled-up
// Every of their range (or 0) answer from rollups exactly as from the raw
// samples; a raw query returns the last sample of each rolled-up bucket. A
// query range that cuts a bucket counts the whole bucket when its start
// lies in the range; ranges on bucket edges are exact.
//
// Removing a rule stops further downsampling; buckets already written
// stay. A bad rule (Every or After not positive, a matcher with an empty
// key, an unknown op, a bad regexp, a newline in the measurement, a broken
// cascade) fails with ErrInvalid and changes nothing. An empty or nil list
// removes every rule.
func (db *DB) SetRollups(rules []RollupRule) error {
	rs, err := compileRollups(rules)
	return storeRules(db, &db.rollups, rs, err)
}

// compiledRollup is a validated RollupRule.
type compiledRollup struct {
	ruleSelector
	every int64
	after int64
}

// rollupSet is one compiled rule list, immutable but for its cache.
type rollupSet struct {
	rules  []compiledRollup
	widest int64 // the largest Every

	levels perSeries[[]compiledRollup] // cascade of each series by catalog id

	// due: by segment file number, when the segment holds data worth
	// rolling up (rollupDueSegment; under compactMu).
	due map[uint64]rollupDue
}

// rollupDue is when a segment's data is worth rolling up: for each
// series' oldest raw samples and finer buckets, when a rule's bound has
// passed them by enough and how old they are. A rewrite is worth it only
// if some data that is due is older than where other data holds the bound
// (worth): judged by data that is not due yet, a rewrite that rolls up
// nothing would follow itself forever.
type rollupDue struct {
	at    int64 // the earliest of notes' (math.MaxInt64 for never)
	notes []rollupNote
}

// rollupNote is one series' data of a segment that a rule's bound passes
// by enough at at; oldest is its oldest time.
type rollupNote struct{ at, oldest int64 }

// worth reports whether, at now, some data that is due lies below limit
// by a widest bucket.
func (d *rollupDue) worth(now, limit, widest int64) bool {
	for _, n := range d.notes {
		if now >= n.at && limit > addSat(n.oldest, widest) {
			return true
		}
	}
	return false
}

// compileRollups validates and compiles rules; nil when there are none.
func compileRollups(rules []RollupRule) (*rollupSet, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	rs := &rollupSet{}
	sels := make(map[string][]compiledRollup)
	for i, r := range rules {
		switch {
		case r.Every <= 0:
			return nil, fmt.Errorf("%w: rollup rule %d: Every %v not positive", ErrInvalid, i, r.Every)
		case r.After <= 0:
			return nil, fmt.Errorf("%w: rollup rule %d: After %v not positive", ErrInvalid, i, r.After)
		}
		sel, err := compileRuleSelector("rollup rule", i, r.Measurement, r.Matchers)
		if err != nil {
			return nil, err
		}
		c := compiledRollup{ruleSelector: sel, every: int64(r.Every), after: int64(r.After)}
		key := selectorKey(r.Measurement, r.Matchers)
		if _, err := addToCascade(sels[key], c); err != nil {
			return nil, fmt.Errorf("%w: rollup rule %d (%s every %v after %v): %v", ErrInvalid, i, describeSel(r.Measurement, r.Matchers), r.Every, r.After, err)
		}
		sels[key], _ = addToCascade(sels[key], c)
		rs.rules = append(rs.rules, c)
		rs.widest = max(rs.widest, c.every)
	}
	return rs, nil
}

// selectorKey identifies a rule's selector, matchers in any order.
func selectorKey(measurement string, ms []Matcher) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("%q%d%q", m.Key, m.Op, m.Value)
	}
	slices.Sort(parts)
	return fmt.Sprintf("%q{%s}", measurement, strings.Join(parts, ","))
}

func describeSel(measurement string, ms []Matcher) string {
	if measurement == "" {
		measurement = "*"
	}
	if len(ms) == 0 {
		return measurement
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("%s%v%q", m.Key, m.Op, m.Value)
	}
	return measurement + "{" + strings.Join(parts, ",") + "}"
}

// addToCascade returns cascade (sorted by every) with c added, or an error
// saying why c does not fit: sorted by Every, each Every must be a
// multiple of the previous and each After longer.
func addToCascade(cascade []compiledRollup, c compiledRollup) ([]compiledRollup, error) {
	i, _ := slices.BinarySearchFunc(cascade, c.every, func(a compiledRollup, e int64) int {
		switch {
		case a.every < e:
			return -1
		case a.every > e:
			return 1
		}
		return 0
	})
	if i < len(cascade) && cascade[i].every == c.every {
		return nil, fmt.Errorf("a rule of Every %v already applies", time.Duration(c.every))
	}
	if i > 0 {
		p := cascade[i-1]
		if c.every%p.every != 0 {
			return nil, fmt.Errorf("Every %v is not a multiple of the finer rule's %v", time.Duration(c.every), time.Duration(p.every))
		}
		if c.after <= p.after {
			return nil, fmt.Errorf("After %v is not longer than the finer rule's %v", time.Duration(c.after), time.Duration(p.after))
		}
	}
	if i < len(cascade) {
		n := cascade[i]
		if n.every%c.every != 0 {
			return nil, fmt.Errorf("the coarser rule's Every %v is not a multiple of %v", time.Duration(n.every), time.Duration(c.every))
		}
		if n.after <= c.after {
			return nil, fmt.Errorf("After %v is not shorter than the coarser rule's %v", time.Duration(c.after), time.Duration(n.after))
		}
	}
	return slices.Insert(slices.Clone(cascade), i, c), nil
}

// cascadeOf returns the rules that apply to series s, sorted by Every.
func (rs *rollupSet) cascadeOf(s *catalog.Series) []compiledRollup {
	if !s.Kind.Numeric() {
		return nil
	}
	var out []compiledRollup
	for i := range rs.rules {
		r := rs.rules[i]
		if r.selects(s) {
			if next, err := addToCascade(out, r); err == nil {
				out = next
			}
		}
	}
	return out
}

// levelsOf returns the cascade of series id (nil: none).
func (rs *rollupSet) levelsOf(c *catalog.Catalog, id uint64) []compiledRollup {
	return rs.levels.at(c, id, rs.cascadeOf)
}

// rollupBefore returns the bound of rule r at now: samples older than it
// are rolled up.
func rollupBefore(r compiledRollup, now int64) int64 {
	return point.FloorTime(subSat(now, r.after), r.every)
}

// rollupFunc returns the compaction's MergeOptions.Rollup: the levels of
// each series at now, each bound capped at limit (nothing outside the
// compaction's inputs is older than it); nil without rules.
func (db *DB) rollupFunc(now, limit int64) func(key []byte, kind point.Kind) []compaction.RollupLevel {
	rs := db.rollups.Load()
	if rs == nil {
		return nil
	}
	return func(key []byte, kind point.Kind) []compaction.RollupLevel {
		id, ok := db.cat.Lookup(string(key))
		if !ok {
			return nil
		}
		cascade := rs.levelsOf(db.cat, id)
		var out []compaction.RollupLevel
		for _, r := range cascade {
			before := min(rollupBefore(r, now), point.FloorTime(limit, r.every))
			if len(out) > 0 && before > out[len(out)-1].Before {
				before = out[len(out)-1].Before // a multiple of every too
			}
			out = append(out, compaction.RollupLevel{Every: r.every, Before: before})
		}
		return out
	}
}

// rollupLimit returns how far a compaction of inputs may roll up: the
// oldest time of any other data, in v or in the memtables, that may share
// a series and a bucket with them (its keys overlap theirs and it reaches
// the widest bucket their oldest sample falls in). Rolled up below that, a
// sample of the inputs could meet, later, a sample of its series and time
// as raw data; data wholly before the inputs' buckets only adds buckets.
func (db *DB) rollupLimit(v *version, inputs []*segHandle) int64 {
	rs := db.rollups.Load()
	if rs == nil || len(inputs) == 0 {
		return math.MinInt64
	}
	limit := int64(math.MaxInt64)
	in := make(map[*segHandle]bool, len(inputs))
	first, last := string(inputs[0].Meta.FirstKey), string(inputs[0].Meta.LastKey)
	mint := inputs[0].Meta.MinTime
	for _, h := range inputs {
		in[h] = true
		first, last = min(first, string(h.Meta.FirstKey)), max(last, string(h.Meta.LastKey))
		mint = min(mint, h.Meta.MinTime)
	}
	reach := point.FloorTime(mint, rs.widest) // the start of the widest bucket mint may fall in
	// The memtables with the version they go with: a flush published since
	// v was taken moved data out of them into a segment v does not hold.
	// (Only compaction, which the caller runs, removes segments: the
	// current version holds every segment of v but those it replaces.)
	db.mu.Lock()
	cur := db.mu.v
	if cur != nil {
		cur.Ref()
		defer db.unrefVersion(cur)
	}
	mems := append([]*memRef{db.mu.mem}, db.mu.imm...)
	db.mu.Unlock()
	for _, vv := range []*version{v, cur} {
		if vv == nil {
			continue
		}
		for _, level := range vv.Levels {
			for _, h := range level {
				if in[h] || h.Meta.Samples == 0 || string(h.Meta.LastKey) < first || string(h.Meta.FirstKey) > last || h.Meta.MaxTime < reach {
					continue
				}
				limit = min(limit, h.Meta.MinTime)
			}
		}
	}
	for _, m := range mems {
		if m != nil && m.t.Len() > 0 && m.t.MaxTime() >= reach {
			limit = min(limit, m.t.MinTime())
		}
	}
	return limit
}

// rollupDueFraction is the share of a segment's time span that its
// rollable data must reach before compaction rewrites the segment to roll
// it up: bounds moving every minute must not keep the bottom level in
// rewrite.
const rollupDueFraction = 0.25

// rollupDueSegment returns the file number of a bottom-most segment of v
// (the deepest, then the oldest) holding raw samples, or buckets of a
// finer rule, that a rule's bound has passed by enough; ok is false when
// there is none. What is not due yet records when it will be. Only
// compaction calls it, under db.compactMu.
func (db *DB) rollupDueSegment(v *version, now int64) (fileNum uint64, ok bool) {
	rs := db.rollups.Load()
	if rs == nil {
		return 0, false
	}
	if rs.due == nil {
		rs.due = make(map[uint64]rollupDue)
	}
	return oldestDue(v, rs.due, func(l int, h *segHandle) bool {
		d, ok := rs.due[h.FileNum]
		if !ok {
			d = db.rollupDueAt(rs, h)
			rs.due[h.FileNum] = d
		}
		if now < d.at || h.Meta.Samples == 0 {
			return false
		}
		// Worth it only when other data leaves room past the oldest data
		// that is due (else the rewrite would roll up nothing, again and
		// again), counting what the compaction will take with h: below L0
		// a segment is rewritten alone, an L0 one goes down with every L0
		// segment and the L1 ones they overlap.
		return d.worth(now, db.rollupLimit(v, rewriteInputs(v, l, h)), rs.widest)
	})
}

// rewriteInputs returns the segments a rewrite of segment h of level l
// merges, as the compaction policy picks them.
func rewriteInputs(v *version, l int, h *segHandle) []*segHandle {
	if l > 0 {
		return []*segHandle{h}
	}
	in := slices.Clone(v.Levels[0])
	first, last := string(h.Meta.FirstKey), string(h.Meta.LastKey)
	for _, o := range in {
		first, last = min(first, string(o.Meta.FirstKey)), max(last, string(o.Meta.LastKey))
	}
	for _, o := range v.Levels[1] {
		if string(o.Meta.LastKey) >= first && string(o.Meta.FirstKey) <= last {
			in = append(in, o)
		}
	}
	return in
}

// rollupDueAt returns when each series of h has data worth rolling up
// (at math.MaxInt64 for never) and how old that data is.
func (db *DB) rollupDueAt(rs *rollupSet, h *segHandle) rollupDue {
	d := rollupDue{at: math.MaxInt64}
	byPos, known := db.segSeriesIDs(h)
	if !known {
		return d
	}
	span := rollupDueFraction * (float64(h.Meta.MaxTime) - float64(h.Meta.MinTime) + 1)
	var si segment.SeriesIndex
	note := func(t int64, r compiledRollup) {
		at := dueAfter(t, r, span)
		if at == math.MaxInt64 {
			return
		}
		d.at = min(d.at, at)
		d.notes = append(d.notes, rollupNote{at: at, oldest: t})
	}
	for pos, id := range byPos {
		cascade := rs.levelsOf(db.cat, id)
		if len(cascade) == 0 {
			continue
		}
		h.Reader.SeriesInto(pos, &si)
		if len(si.Blocks) == 0 && len(si.Rollups) == 0 || !rollableFrom(si.MinTime(), cascade) {
			continue // compaction leaves it as it is (compaction/rollup.go)
		}
		// Raw samples: due once the finest rule's bound passes the oldest
		// by the span's fraction.
		if len(si.Blocks) > 0 {
			note(si.Blocks[0].MinTime, cascade[0])
		}
		// Buckets finer than a coarser rule: due likewise.
		for _, rm := range si.Rollups {
			for _, r := range cascade {
				if r.every > rm.Every {
					note(rm.MinTime, r)
					break
				}
			}
		}
	}
	return d
}

// rollableFrom reports whether data from t on has a bucket at every rule
// of cascade: within a rule's Every of math.MinInt64 it may have none (its
// bucket would start below what int64 holds), and compaction rolls up no
// series holding such data.
func rollableFrom(t int64, cascade []compiledRollup) bool {
	for _, r := range cascade {
		if !point.HasBucket(t, r.every) {
			return false
		}
	}
	return true
}

// dueAfter returns when rule r's bound passes t by frac nanoseconds (at
// least one bucket).
func dueAfter(t int64, r compiledRollup, frac float64) int64 {
	f := float64(t) + float64(r.after) + max(frac, float64(r.every)) + float64(r.every)
	if f >= math.MaxInt64/2 {
		return math.MaxInt64
	}
	return int64(math.Ceil(f))
}

// markForRewrite marks segment num of levels for the policy to rewrite.
func markForRewrite(levels [][]compaction.SegmentInfo, num uint64) {
	for l := range levels {
		for i := range levels[l] {
			levels[l][i].Tombstoned = levels[l][i].Tombstoned || levels[l][i].FileNum == num
		}
	}
}
