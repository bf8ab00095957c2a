package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/stratadb/strata/internal/point"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLifecycleModel drives the lifecycle features together against the
// reference model: retention rules changed at run time
// (SetRetentionRules), rollups (Options.Rollups, SetRollups), the disk
// budget (MaxDiskBytes) and the series limits (MaxSeries,
// MaxSeriesPerMeasurement), on an injected clock that moves forward by
// minutes so that rollups and retention kick in. Random writes, deletes,
// flushes, compactions, reopens and clock moves run, and every few steps
// the data is checked in each state: memtable, flushed, compacted,
// reopened and opened read-only.
//
// What the model cannot predict it learns from the database and checks:
// the buckets a compaction rolled up (each must reduce exactly the samples
// it replaces, and raw reads then show its last sample, aggregates count
// it whole at its start, bit for bit), the expiry floor the budget or
// retention raised (Stats().OldestKept: nothing older is visible, all that
// is newer is exact, the floor never passes the newest sample written and
// survives a reopen), and, when a rule is lengthened, the samples shown
// again (each one the model holds: never an overwritten value).
//
// Which merges compaction picks, and so which buckets and drops a run
// sees, varies from run to run; the workload is checked to be wide enough
// over all seeds together.
func TestLifecycleModel(t *testing.T) {
	seeds, steps := []uint64{1, 2, 3, 4}, 300
	if raceEnabled {
		seeds = seeds[:2]
	}
	var total lmCounts
	var mu sync.Mutex
	t.Run("seeds", func(t *testing.T) {
		for _, seed := range seeds {
			t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
				t.Parallel()
				c := runLifecycleModel(t, seed, steps)
				mu.Lock()
				total.add(c)
				mu.Unlock()
			})
		}
	})
	if !t.Failed() && (total.refusals == 0 || total.budgetDrops == 0 || total.ruleChanges == 0 || total.revealed == 0 || total.buckets == 0) {
		t.Errorf("workload too narrow: %+v", total)
	}
}

// lmCounts counts what a run exercised.
type lmCounts struct {
	refusals, revealed, ruleChanges, floorRaises, budgetDrops, buckets int
}

func (c *lmCounts) add(o lmCounts) {
	c.refusals += o.refusals
	c.revealed += o.revealed
	c.ruleChanges += o.ruleChanges
	c.floorRaises += o.floorRaises
	c.budgetDrops += o.budgetDrops
	c.buckets += o.buckets
}

const (
	lmMinute = int64(time.Minute)
	// lmBudget is a disk budget that the workload passes several times.
	lmBudget = 6 << 10
)

var (
	lmMeasurements = []string{"m", "n", "o"}
	lmHosts        = []string{"a", "b", "c", "d", "e", "f"}
	lmFields       = []string{"v", "i", "u", "s"}
	lmKinds        = []Kind{KindFloat, KindInt, KindUint, KindString}
	// lmRollups: m rolls up to 1m after 2h, then 10m after 6h; n,host=a
	// to 5m after 3h.
	lmRollups = []RollupRule{
		{Measurement: "m", Every: time.Minute, After: 2 * time.Hour},
		{Measurement: "m", Every: 10 * time.Minute, After: 6 * time.Hour},
		{Measurement: "n", Matchers: []Matcher{{Key: "host", Op: MatchEqual, Value: "a"}}, Every: 5 * time.Minute, After: 3 * time.Hour},
	}
	// lmRulePool: retention rules of series that are never rolled up,
	// drawn at random, in random order, lengthened and shortened at will.
	lmRulePool = []RetentionRule{
		{Measurement: "o", Keep: 3 * time.Hour},
		{Measurement: "o", Matchers: []Matcher{{Key: "host", Op: MatchRegexp, Value: "[ab]"}}, Keep: 0},
		{Measurement: "n", Matchers: []Matcher{{Key: "host", Op: MatchNotEqual, Value: "a"}}, Keep: 4 * time.Hour},
		{Measurement: "n", Matchers: []Matcher{{Key: "host", Op: MatchEqual, Value: "c"}}, Keep: 5 * time.Hour},
		{Measurement: "o", Matchers: []Matcher{{Key: "host", Op: MatchNotRegexp, Value: "[a-c]"}}, Keep: 30 * time.Hour},
		{Measurement: "o", Matchers: []Matcher{{Key: "host", Op: MatchEqual, Value: "f"}}, Keep: 90 * time.Minute},
	}
)

// lmRolled reports whether a series of measurement meas and host may be
// rolled up: its writes stay within the last hour, shorter than every
// After, so that no write lands in a bucket already rolled up.
func lmRolled(meas, host string) bool { return meas == "m" || (meas == "n" && host == "a") }

// lmState is one run: the database, its options, the model and the clock.
type lmState struct {
	t       *testing.T
	r       *rand.Rand
	dir     string
	opts    Options
	db      *DB
	m       *RefModel
	now     *atomic.Int64
	rules   []RetentionRule
	rollups []RollupRule
	newest  int64 // the newest sample time written

	keepM, keepDE time.Duration // the keeps of m's rules

	lmCounts
}

func runLifecycleModel(t *testing.T, seed uint64, steps int) lmCounts {
	r := rand.New(rand.NewPCG(seed, 0x11fe))
	now := new(atomic.Int64)
	now.Store(rollupModelBase)
	s := &lmState{t: t, r: r, dir: t.TempDir(), m: NewRefModel(), now: now, newest: math.MinInt64}
	s.rules = s.drawRules()
	s.rollups = slices.Clone(lmRollups)
	s.opts = Options{
		Logger: slog.New(slog.DiscardHandler),
		Sync:   SyncNever,
		// Flushes and compactions run only when the steps ask: a run is
		// the same every time.
		DisableBackgroundCompaction: true,
		WALSegmentBytes:             16 << 10,
		BlockSamples:                32,
		Retention:                   10 * time.Hour,
		MaxDiskBytes:                lmBudget,
		MaxSeries:                   40,
		MaxSeriesPerMeasurement:     16,
		Now:                         func() time.Time { return time.Unix(0, now.Load()) },
	}
	s.m.Now, s.m.Retention = now.Load(), int64(s.opts.Retention)
	s.m.Rules = s.rules
	s.m.MaxSeries, s.m.MaxSeriesPerMeasurement = s.opts.MaxSeries, s.opts.MaxSeriesPerMeasurement
	s.db = openDB(t, s.dir, s.options(false))

	for step := range steps {
		where := fmt.Sprintf("seed %d step %d", seed, step)
		switch x := r.IntN(100); {
		case x < 50:
			s.write(where)
		case x < 55:
			s.deleteRandom(where)
		case x < 64:
			s.advance(int64(10+r.IntN(40))*lmMinute + r.Int64N(60)*int64(time.Second))
		case x < 70:
			mustFlush(t, s.db)
		case x < 75:
			s.compact(where)
		case x < 79:
			s.setRules(where)
		case x < 81:
			s.toggleRollups(where)
		case x < 84:
			s.db = reopen(t, s.db, s.dir, s.options(false))
			s.learnFloor(where+" reopened", true)
		default:
			s.check(where)
		}
		if step%40 == 39 {
			s.allStates(where)
		}
	}
	s.allStates("end")
	for _, sr := range s.m.series {
		s.buckets += len(sr.buckets)
	}
	t.Logf("%d series, %d samples, floor now-%v, disk %d bytes; %+v",
		len(s.m.series), s.m.samples(), time.Duration(now.Load()-s.m.Floor), s.db.Stats().DiskBytes, s.lmCounts)
	return s.lmCounts
}

// options returns the options of the next open, with the current rules
// (they are not stored in the database).
func (s *lmState) options(readOnly bool) *Options {
	o := s.opts
	o.RetentionRules = slices.Clone(s.rules)
	o.Rollups = slices.Clone(s.rollups)
	o.ReadOnly = readOnly
	return &o
}

// drawRules draws a rule list: a few of lmRulePool, and the rules of m,
// whose keeps only shrink (a longer one would show again buckets that
// compaction may have half dropped before they were rolled up: not the
// model's to know), placed anywhere since no pool rule matches m.
func (s *lmState) drawRules() []RetentionRule {
	r := s.r
	var rules []RetentionRule
	for _, i := range r.Perm(len(lmRulePool))[:r.IntN(4)] {
		rules = append(rules, lmRulePool[i])
	}
	if s.keepM == 0 {
		s.keepM, s.keepDE = 9*time.Hour, 5*time.Hour
	}
	s.keepM = max(s.keepM-time.Duration(r.IntN(40))*time.Minute, 4*time.Hour)
	s.keepDE = max(s.keepDE-time.Duration(r.IntN(40))*time.Minute, 150*time.Minute)
	m := []RetentionRule{
		{Measurement: "m", Matchers: []Matcher{{Key: "host", Op: MatchRegexp, Value: "d|e"}}, Keep: s.keepDE},
		{Measurement: "m", Keep: s.keepM},
	}
	at := r.IntN(len(rules) + 1)
	return slices.Insert(rules, at, m...)
}

func (s *lmState) advance(d int64) {
	s.now.Add(d)
	s.m.Now = s.now.Load()
}

// write writes a batch of points: mostly in the last hour on a 10 s grid
// (so overwrites are frequent), and for series that are never rolled up
// now and then far in the past, below their cutoff or the floor.
func (s *lmState) write(where string) {
	t, r := s.t, s.r
	known := s.m.sortedSeries()
	pts := make([]Point, 1+r.IntN(12))
	for i := range pts {
		meas, host := lmMeasurements[r.IntN(len(lmMeasurements))], lmHosts[r.IntN(len(lmHosts))]
		fields := r.Perm(len(lmFields))[:1+r.IntN(2)]
		if len(known) > 0 && r.IntN(12) > 0 {
			// Mostly series that exist: past the limits, new ones are
			// refused, and with them the whole batch.
			sr := known[r.IntN(len(known))]
			meas, host = sr.measurement, sr.tags[0].Value
			fields = fields[:1]
			fields[0] = slices.Index(lmFields, sr.field)
		}
		ts := s.now.Load() - r.Int64N(360)*10*int64(time.Second)
		if !lmRolled(meas, host) && r.IntN(5) == 0 {
			ts = s.now.Load() - r.Int64N(40*60)*30*int64(time.Second)
		}
		p := Point{Measurement: meas, Tags: []Tag{{Key: "host", Value: host}}, Time: ts}
		for _, j := range fields {
			p.Fields = append(p.Fields, Field{Key: lmFields[j], Value: rollupValue(r, lmKinds[j])})
		}
		pts[i] = p
	}
	before := s.db.Stats().SeriesLimitRefusals
	want := s.m.Write(pts)
	err := s.db.Write(pts)
	if want == nil {
		if err != nil {
			t.Fatalf("%s: write: %v", where, err)
		}
		for _, p := range pts {
			s.newest = max(s.newest, p.Time)
		}
		return
	}
	var pe, wpe *PointError
	errors.As(want, &wpe)
	if !errors.Is(err, ErrSeriesLimit) || !errors.As(err, &pe) || pe.Index != wpe.Index {
		t.Fatalf("%s: write past a series limit at point %d returned %v", where, wpe.Index, err)
	}
	if after := s.db.Stats().SeriesLimitRefusals; after <= before {
		t.Fatalf("%s: a refused write left SeriesLimitRefusals at %d", where, after)
	}
	s.refusals++
}

func (s *lmState) deleteRandom(where string) {
	r := s.r
	sel := Selector{Measurement: lmMeasurements[r.IntN(len(lmMeasurements))]}
	if r.IntN(2) == 0 {
		sel.Matchers = []Matcher{{Key: "host", Op: MatchRegexp, Value: lmHosts[r.IntN(len(lmHosts))] + "|" + lmHosts[r.IntN(len(lmHosts))]}}
	}
	if r.IntN(3) == 0 {
		sel.Field = lmFields[r.IntN(len(lmFields))]
	}
	sel.Start = s.now.Load() - r.Int64N(14*60)*lmMinute
	sel.End = sel.Start + 1 + r.Int64N(90)*lmMinute
	mustDelete(s.t, s.db, sel)
	s.m.Delete(sel)
}

// compact compacts and learns what the model cannot predict: the floor
// and the buckets.
func (s *lmState) compact(where string) {
	mustCompact(s.t, s.db)
	s.learnFloor(where+" compacted", false)
	s.learnBuckets(where + " compacted")
}

// learnFloor takes the database's expiry floor: it never falls, and
// after a reopen it is the one before (it is durable). A floor above the
// newest sample written would have dropped the newest data.
func (s *lmState) learnFloor(where string, reopened bool) {
	t := s.t
	f := s.db.Stats().OldestKept
	switch {
	case f < s.m.Floor:
		t.Fatalf("%s: floor fell from %d to %d", where, s.m.Floor, f)
	case reopened && f != s.m.Floor:
		t.Fatalf("%s: floor %d after a reopen, was %d", where, f, s.m.Floor)
	case f > s.newest && f > s.m.Floor:
		t.Fatalf("%s: floor %d passes the newest sample written %d", where, f, s.newest)
	}
	if f > s.m.Floor {
		s.floorRaises++
		// Retention raises the floor to the oldest cutoff of all at most;
		// past that, the budget raised it.
		longest := s.m.Retention
		for _, rule := range s.m.Rules {
			if rule.Keep == 0 {
				longest = 0
				break
			}
			longest = max(longest, int64(rule.Keep))
		}
		if longest > 0 && f > s.m.Now-longest {
			s.budgetDrops++
		}
	}
	s.m.Floor = f
}

// learnBuckets checks the stored buckets and takes them: only series
// with rules have buckets (never bool or string ones), of the rules'
// widths, and none ends after its rule's bound.
func (s *lmState) learnBuckets(where string) {
	t := s.t
	stored, err := storedBuckets(s.db)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	for key, rus := range stored {
		sr := s.m.series[key]
		if sr == nil {
			continue // LearnBuckets reports it
		}
		host := ""
		if len(sr.tags) > 0 {
			host = sr.tags[0].Value
		}
		if !lmRolled(sr.measurement, host) || !sr.kind.Numeric() {
			t.Fatalf("%s: %s has %d buckets and no rule", where, key, len(rus))
		}
		for _, ru := range rus {
			ok := false
			for _, rule := range lmRollups {
				if rule.Measurement == sr.measurement && int64(rule.Every) == ru.Every &&
					ru.Start+ru.Every <= point.FloorTime(s.now.Load()-int64(rule.After), ru.Every) {
					ok = true
				}
			}
			if !ok {
				t.Fatalf("%s: %s: bucket %d every %d fits no rule at now %d", where, key, ru.Start, ru.Every, s.now.Load())
			}
		}
	}
	if p := s.m.LearnBuckets(stored); p != "" {
		t.Fatalf("%s: %s", where, p)
	}
}

// setRules changes the retention rules at run time. A change that would
// lengthen the retention of a series that is rolled up is skipped (what
// a bucket half dropped before it was rolled up shows is not the model's
// to know); for the others, the samples a longer rule shows again are
// learned from the database and checked.
func (s *lmState) setRules(where string) {
	t := s.t
	next := s.drawRules()
	old := s.m.clone()
	s.m.Rules = next
	var grown []*refSeries
	for _, sr := range s.m.sortedSeries() {
		oc, nc := old.cutoffOf(old.series[sr.key]), s.m.cutoffOf(sr)
		if nc >= oc {
			continue
		}
		host := ""
		if len(sr.tags) > 0 {
			host = sr.tags[0].Value
		}
		if lmRolled(sr.measurement, host) {
			t.Fatalf("%s: rules %v would lengthen the retention of %s, which has buckets", where, next, sr.key)
		}
		grown = append(grown, sr)
	}
	if err := s.db.SetRetentionRules(next); err != nil {
		t.Fatalf("%s: SetRetentionRules: %v", where, err)
	}
	s.rules = next
	s.ruleChanges++
	for _, sr := range grown {
		lo, hi := s.m.cutoffOf(sr), old.cutoffOf(old.series[sr.key])
		q := Query{Selector: Selector{Measurement: sr.measurement, Tags: sr.tags, Field: sr.field, Start: lo, End: hi}}
		var got []Sample
		for _, res := range mustQuery(t, s.db, q) {
			if res.Key() == sr.key {
				got = res.Samples
			}
		}
		if p := s.m.Reveal(sr.key, lo, hi-1, got); p != "" {
			t.Fatalf("%s: after lengthening a rule: %s", where, p)
		}
		s.revealed += len(got)
	}
}

// toggleRollups drops or restores the rule of n at run time: its buckets
// stay, and no new ones come while it is gone.
func (s *lmState) toggleRollups(where string) {
	next := lmRollups[:2]
	if len(s.rollups) == 2 {
		next = lmRollups
	}
	if err := s.db.SetRollups(next); err != nil {
		s.t.Fatalf("%s: SetRollups: %v", where, err)
	}
	s.rollups = slices.Clone(next)
}

// allStates brings the data through every state and checks each:
// memtable, flushed, compacted, reopened, opened read-only.
func (s *lmState) allStates(where string) {
	t := s.t
	s.check(where + ", memtable")
	mustFlush(t, s.db)
	s.check(where + ", flushed")
	s.compact(where)
	s.check(where + ", compacted")
	if st := s.db.Stats(); st.DiskBytes > s.opts.MaxDiskBytes*11/10 {
		t.Errorf("%s, compacted: %d bytes on disk, budget %d", where, st.DiskBytes, s.opts.MaxDiskBytes)
	}
	s.db = reopen(t, s.db, s.dir, s.options(false))
	s.learnFloor(where+", reopened", true)
	s.check(where + ", reopened")
	if err := s.db.Close(); err != nil {
		t.Fatalf("%s: close: %v", where, err)
	}
	s.db = openDB(t, s.dir, s.options(true))
	s.learnFloor(where+", read-only", true)
	s.check(where + ", read-only")
	s.db = reopen(t, s.db, s.dir, s.options(false))
}

var lmEvery = []int64{0, 0, lmMinute, 5 * lmMinute, 10 * lmMinute, 60 * lmMinute, 7 * lmMinute, 90 * int64(time.Second), 180 * lmMinute}

// check compares the database with the model: every measurement raw over
// all time, random raw reads, aggregates (per series and grouped, on
// bucket edges or not, with widths that are multiples of the buckets' or
// not) and the metadata calls.
func (s *lmState) check(where string) {
	t, r, db, m := s.t, s.r, s.db, s.m
	for _, meas := range lmMeasurements {
		checkQuery(t, db, m, rawAll(meas), minTime, where)
	}
	for range 6 {
		sel := s.selector()
		checkQuery(t, db, m, Query{Selector: sel}, minTime, where)
		q := Query{Selector: sel, Agg: allAggs[1+r.IntN(len(allAggs)-1)], Every: lmEvery[r.IntN(len(lmEvery))]}
		checkQuery(t, db, m, q, minTime, where)
		for _, gb := range [][]string{{}, {"host"}} {
			q.GroupBy = gb
			got, err := db.Query(context.Background(), q)
			if err != nil {
				t.Fatalf("%s: query %s: %v", where, formatQuery(q), err)
			}
			if d := diffResults(q.Agg, got, m.Query(q)); d != "" {
				t.Fatalf("%s: grouped query %s: %s", where, formatQuery(q), d)
			}
		}
	}
	sel := s.selector()
	if r.IntN(3) == 0 {
		sel.Measurement = ""
	}
	checkMeta(t, db, m, sel, where)
}

// selector returns a random selector: a measurement, maybe a host matcher
// and a field, and a range over the last 14 hours, on 10-minute edges half
// of the time, or all time.
func (s *lmState) selector() Selector {
	r := s.r
	sel := Selector{Measurement: lmMeasurements[r.IntN(len(lmMeasurements))]}
	if r.IntN(2) == 0 {
		sel.Matchers = []Matcher{{Key: "host", Op: MatchOp(r.IntN(4)), Value: lmHosts[r.IntN(len(lmHosts))]}}
	}
	if r.IntN(3) == 0 {
		sel.Field = lmFields[r.IntN(len(lmFields))]
	}
	if r.IntN(5) == 0 {
		return sel
	}
	now := s.now.Load()
	sel.Start = now - r.Int64N(14*3600)*int64(time.Second)
	sel.End = sel.Start + 1 + r.Int64N(6*3600)*int64(time.Second)
	if r.IntN(2) == 0 {
		sel.Start = point.FloorTime(sel.Start, 10*lmMinute)
		sel.End = point.FloorTime(sel.End, 10*lmMinute) + 10*lmMinute
	}
	return sel
}
