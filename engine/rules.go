package engine

// Retention rules: how long each series' samples are kept.
//
// The first rule whose selector (measurement, "" for every one, and
// matchers, ANDed) matches a series sets its keep; a series no rule matches
// keeps Options.Retention. A keep of 0 keeps the series' samples forever.
// A series' tags never change, so its keep is a pure function of the rule
// list: each compiled rule list (a ruleSet, replaced whole by
// SetRetentionRules) caches the keep of every series by catalog id, filled
// in on first use, so a reader pays one array load per series.
//
// Reads hide a sample older than its series' cutoff, now minus its keep,
// and never older than the expiry floor (readview.go). The base cutoff
// is the least of them: now minus the longest keep (none when some keep is
// forever), never below the floor. Compaction drops below the base cutoff
// everywhere and raises the floor to it, as Retention alone does.
//
// Below a series' own cutoff, compaction drops its samples only when the
// merge's output is the bottom-most data of its key and time range (no
// segment left in a level at or below the inputs' shallowest one overlaps
// them): a value it drops may have overwritten an older one, and an older
// one lives only in a deeper (or, in L0, an older) segment, so none is left
// behind to show again if the rule is lengthened later. Elsewhere the
// samples stay on disk, hidden by the read cutoff. So a shortened rule hides
// at once; a lengthened one shows again the samples compaction has not
// dropped yet (a rule change is not a delete), and never a value that a
// dropped one had overwritten.

import (
	"fmt"
	"math"
	"time"

	"github.com/stratadb/strata/compaction"
	"github.com/stratadb/strata/internal/catalog"
	"github.com/stratadb/strata/segment"
)

// RetentionRule sets how long the samples of the series it selects are
// kept. See DB.SetRetentionRules.
type RetentionRule struct {
	Measurement string    // "" = every measurement
	Matchers    []Matcher // ANDed; none = every series of the measurement
	Keep        time.Duration
}

// SetRetentionRules replaces the retention rules (Options.RetentionRules)
// at run time. The first rule whose selector matches a series sets how long
// its samples are kept; series no rule matches keep Options.Retention. A
// rule with Keep 0 keeps its series forever. Samples older than now minus
// their series' keep are invisible to every read at once and dropped by
// compaction. Lengthening a rule shows again the samples compaction has not
// dropped yet, never a value a dropped sample had overwritten, and never
// anything older than what Retention or an earlier rule set already
// expired for good (the expiry floor).
//
// A bad rule (a negative Keep, a matcher with an empty key, an unknown op,
// a bad regexp, a newline in the measurement) fails with ErrInvalid and
// changes nothing. A read-only DB accepts rules: they only change what its
// reads see. An empty or nil list removes every rule.
func (db *DB) SetRetentionRules(rules []RetentionRule) error {
	rs, err := compileRules(rules, db.opts.Retention)
	return storeRules(db, &db.rules, rs, err)
}

// compiledRule is a validated RetentionRule.
type compiledRule struct {
	ruleSelector
	keep int64 // nanoseconds; 0 = forever
}

// ruleSet is one compiled rule list, immutable but for its cache.
type ruleSet struct {
	rules     []compiledRule
	retention int64 // Options.Retention, for series no rule matches
	longest   int64 // the longest keep of all; 0 when one is forever
	shortest  int64 // the shortest keep but forever; 0 when all are forever

	keeps perSeries[int64] // keep of each series by catalog id

	// due: by segment file number, the earliest time the segment may hold
	// rule-expired data worth a rewrite (ruleExpired; under compactMu).
	due map[uint64]int64
}

// compileRules validates and compiles rules; nil when there are none.
func compileRules(rules []RetentionRule, retention time.Duration) (*ruleSet, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	rs := &ruleSet{retention: int64(retention), longest: int64(retention), shortest: int64(retention)}
	for i, r := range rules {
		if r.Keep < 0 {
			return nil, fmt.Errorf("%w: retention rule %d: negative Keep", ErrInvalid, i)
		}
		sel, err := compileRuleSelector("retention rule", i, r.Measurement, r.Matchers)
		if err != nil {
			return nil, err
		}
		rs.rules = append(rs.rules, compiledRule{ruleSelector: sel, keep: int64(r.Keep)})
		if r.Keep > 0 && (rs.shortest == 0 || int64(r.Keep) < rs.shortest) {
			rs.shortest = int64(r.Keep)
		}
		if r.Keep == 0 || rs.longest == 0 {
			rs.longest = 0
		} else {
			rs.longest = max(rs.longest, int64(r.Keep))
		}
	}
	return rs, nil
}

// keepOf returns the keep of series s: its first matching rule's, or the
// retention.
func (rs *ruleSet) keepOf(s *catalog.Series) int64 {
	for i := range rs.rules {
		if r := &rs.rules[i]; r.selects(s) {
			return r.keep
		}
	}
	return rs.retention
}

// covering returns the keeps of every series c holds now.
func (rs *ruleSet) covering(c *catalog.Catalog) []int64 {
	return rs.keeps.all(c, rs.keepOf)
}

// cutoffs are the retention cutoffs of one read or compaction, taken at
// one instant.
type cutoffs struct {
	base  int64   // every sample older than it is invisible
	now   int64   // Now(), in nanoseconds
	keeps []int64 // by series id; nil without rules
	rs    *ruleSet
}

// cutoffs returns the retention cutoffs now, covering every series of the
// catalog.
func (db *DB) cutoffs() *cutoffs {
	now := db.opts.Now().UnixNano()
	floor := db.vis.floor.Load()
	rs := db.rules.Load()
	if rs == nil {
		c := &cutoffs{base: floor, now: now}
		if db.opts.Retention > 0 {
			c.base = max(floor, subSat(now, int64(db.opts.Retention)))
		}
		return c
	}
	c := &cutoffs{base: floor, now: now, rs: rs, keeps: rs.covering(db.cat)}
	if rs.longest > 0 {
		c.base = max(floor, subSat(now, rs.longest))
	}
	return c
}

// of returns the oldest visible time of series id (a series newer than
// the cutoffs is looked up in the catalog).
func (c *cutoffs) of(db *DB, id uint64) int64 {
	if c.rs == nil {
		return c.base
	}
	keep := c.keepOf(db, id)
	if keep == 0 {
		return c.base
	}
	return max(c.base, subSat(c.now, keep))
}

// keepOf returns the keep of series id under c's rules (0: forever).
func (c *cutoffs) keepOf(db *DB, id uint64) int64 {
	if id < uint64(len(c.keeps)) {
		return c.keeps[id]
	}
	if m, ok := db.cat.Meta(id); ok {
		return c.rs.keepOf(m)
	}
	return 0
}

// top returns the latest cutoff of any series: at or after it, every
// series' samples are inside its retention.
func (c *cutoffs) top() int64 {
	if c.rs == nil || c.rs.shortest == 0 {
		return c.base
	}
	return max(c.base, subSat(c.now, c.rs.shortest))
}

// subSat returns a - b (b >= 0), saturating at math.MinInt64.
func subSat(a, b int64) int64 {
	if a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

// ruleDrop returns, for a compaction whose output is the bottom-most data
// of its range, the range each series' rule cutoff drops above the base
// cutoff; nil when no rule applies.
func (db *DB) ruleDrop(c *cutoffs) func(key []byte) []compaction.TimeRange {
	if c.rs == nil {
		return nil
	}
	return func(key []byte) []compaction.TimeRange {
		id, ok := db.cat.Lookup(string(key))
		if !ok {
			return nil
		}
		if cut := c.of(db, id); cut > c.base {
			return []compaction.TimeRange{{Min: math.MinInt64, Max: cut - 1}}
		}
		return nil
	}
}

// joinDrops returns a Drop function giving the ranges of both a and b.
func joinDrops(a, b func(key []byte) []compaction.TimeRange) func(key []byte) []compaction.TimeRange {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(key []byte) []compaction.TimeRange {
		return append(a(key), b(key)...)
	}
}

// bottomMost reports whether no segment of v outside inputs, in a level
// at or below the shallowest input's, overlaps the inputs' key and time
// range: then nothing older than the inputs' data of that range is left.
func bottomMost(v *version, inputs []*segHandle) bool {
	if len(inputs) == 0 {
		return false
	}
	in := make(map[*segHandle]bool, len(inputs))
	top := maxLevels
	first, last := string(inputs[0].Meta.FirstKey), string(inputs[0].Meta.LastKey)
	mint, maxt := inputs[0].Meta.MinTime, inputs[0].Meta.MaxTime
	for _, h := range inputs {
		in[h] = true
		top = min(top, h.Level)
		first, last = min(first, string(h.Meta.FirstKey)), max(last, string(h.Meta.LastKey))
		mint, maxt = min(mint, h.Meta.MinTime), max(maxt, h.Meta.MaxTime)
	}
	for l := top; l < maxLevels; l++ {
		for _, h := range v.Levels[l] {
			if in[h] || string(h.Meta.LastKey) < first || string(h.Meta.FirstKey) > last ||
				h.Meta.MaxTime < mint || h.Meta.MinTime > maxt {
				continue
			}
			return false
		}
	}
	return true
}

// ruleExpiredFraction is the share of a segment's time span that one of
// its series' rule cutoffs must pass before compaction rewrites the
// segment to drop what the rule expired (like the policy's
// ExpiredFraction for Retention): a cutoff that moves every second must
// not keep the bottom level in rewrite.
const ruleExpiredFraction = 0.25

// ruleExpired returns the file number of a bottom-most segment of v (the
// deepest, then the oldest) where some series' rule cutoff has passed its
// oldest sample there by at least ruleExpiredFraction of the segment's time
// span; ok is false when there is none. A segment's index entries are read
// once per rule list: what is not due yet leaves the time it will be, and
// until then the segment is skipped. Only compaction calls it, under
// db.compactMu, which guards the rule list's due map.
func (db *DB) ruleExpired(v *version, c *cutoffs) (fileNum uint64, ok bool) {
	rs := c.rs
	if rs == nil {
		return 0, false
	}
	if rs.due == nil {
		rs.due = make(map[uint64]int64)
	}
	return oldestDue(v, rs.due, func(_ int, h *segHandle) bool {
		if d, ok := rs.due[h.FileNum]; ok && c.now < d {
			return false
		}
		if h.Meta.Samples == 0 || !bottomMost(v, []*segHandle{h}) {
			return false // bottom-most, it may be due; until then it is not
		}
		due, now := db.ruleDue(h, c)
		if !now {
			rs.due[h.FileNum] = due
		}
		return now
	})
}

// oldestDue returns the file number of the segment of v that due picks,
// looking from the deepest level up and, in a level, for the oldest (the
// lowest file number); ok is false when due picks none. due may record
// what it learns of a segment in memo, whose entries for segments no
// longer in v are dropped when none is picked.
func oldestDue[T any](v *version, memo map[uint64]T, due func(level int, h *segHandle) bool) (fileNum uint64, ok bool) {
	live := make(map[uint64]bool)
	for l := maxLevels - 1; l >= 0; l-- {
		found := false
		for _, h := range v.Levels[l] {
			live[h.FileNum] = true
			if found && h.FileNum > fileNum {
				continue
			}
			if due(l, h) {
				fileNum, found = h.FileNum, true
			}
		}
		if found {
			return fileNum, true
		}
	}
	for num := range memo {
		if !live[num] {
			delete(memo, num)
		}
	}
	return 0, false
}

// ruleDue reports whether some series of h is due for a rewrite now (its
// rule cutoff has passed its oldest sample in h by ruleExpiredFraction of
// h's span: after a rewrite that starts again from 0, so each rewrite waits
// for the cutoff to move that far); if none is, it returns the earliest
// time one may be (math.MaxInt64 for never).
func (db *DB) ruleDue(h *segHandle, c *cutoffs) (due int64, now bool) {
	due = math.MaxInt64
	byPos, known := db.segSeriesIDs(h)
	if !known {
		return due, false
	}
	frac := ruleExpiredFraction * (float64(h.Meta.MaxTime) - float64(h.Meta.MinTime) + 1)
	var si segment.SeriesIndex
	for pos, id := range byPos {
		keep := c.keepOf(db, id)
		if keep == 0 || (c.rs.longest > 0 && keep >= c.rs.longest) {
			continue // the base cutoff covers it
		}
		h.Reader.SeriesInto(pos, &si)
		if len(si.Blocks) == 0 {
			continue
		}
		at := int64(math.MaxInt64)
		if f := float64(si.MinTime()) + float64(keep) + frac; f < math.MaxInt64/2 {
			at = int64(math.Ceil(f))
		}
		// And the cutoff must be above the base one (the expiry floor may
		// be higher than now minus keep).
		at = max(at, addSat(c.base, keep)+1)
		if c.now >= at {
			return 0, true
		}
		due = min(due, at)
	}
	return due, false
}

// addSat returns a + b (b >= 0), saturating at math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
