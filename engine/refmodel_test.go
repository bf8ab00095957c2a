package engine

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strings"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/segment"
)

// RefModel is the reference model of the data model, shared by every
// model test of the engine, internal (package engine) and black-box
// (package engine_test, which sees it because it is exported from a
// _test.go file of package engine): a map from series key to samples,
// kinds fixed forever, answering queries per docs/design.md by brute
// force.
//
// Besides writes and deletes it knows what hides samples: Retention and
// retention rules at a clock (Now), the expiry floor (Floor, which the
// database reports as Stats().OldestKept, raised by retention and the
// disk budget), the series limits, and rolled-up buckets. Which buckets a
// compaction writes depends on the engine's choice of merges, so the model
// learns them from the database (LearnBuckets) and checks each against
// the samples it stands for; from then on raw reads show a bucket's last
// sample, aggregates count the bucket's samples in the query bucket of
// its start, and a delete, retention or the floor hide it by its start.
type RefModel struct {
	series map[string]*refSeries

	// Retention hides, in series no rule matches, samples older than
	// Now - Retention (0 = keep forever), as Options.Retention does.
	Retention int64
	// Rules are the retention rules, evaluated at Now.
	Rules []RetentionRule
	Now   int64
	// Floor is the expiry floor: samples (and buckets starting) below it
	// are gone for good. math.MinInt64 until the database reports one.
	Floor int64
	// MaxSeries and MaxSeriesPerMeasurement are the series limits (0 =
	// none): a Write that would create a series past one fails whole.
	MaxSeries, MaxSeriesPerMeasurement int
}

// refSeries is one series of the model. Its kind stays fixed when its
// samples are deleted, and it counts for the limits forever.
type refSeries struct {
	key         string
	measurement string
	tags        []Tag // sorted
	field       string
	kind        Kind
	samples     map[int64]Value // every sample written and not deleted, rolled up or not
	buckets     []modelBucket   // rolled-up buckets, by start, learned from the database
}

// modelBucket is a rolled-up bucket [start, start+every): the series'
// samples in it are its members.
type modelBucket struct{ start, every int64 }

// refSample is a sample as an aggregate sees it: at is the time it is
// counted at (its own, or its bucket's start).
type refSample struct {
	Sample
	at  int64
	key string // its series' key, for ties between series
}

// NewRefModel returns an empty model with no retention, rules or limits.
func NewRefModel() *RefModel {
	return &RefModel{series: make(map[string]*refSeries), Floor: math.MinInt64}
}

func (m *RefModel) clone() *RefModel {
	c := *m
	c.series = make(map[string]*refSeries, len(m.series))
	c.Rules = slices.Clone(m.Rules)
	for k, s := range m.series {
		cs := *s
		cs.samples = make(map[int64]Value, len(s.samples))
		for t, v := range s.samples {
			cs.samples[t] = v
		}
		cs.buckets = slices.Clone(s.buckets)
		c.series[k] = &cs
	}
	return &c
}

func sortedTags(tags []Tag) []Tag {
	s := slices.Clone(tags)
	point.SortTags(s)
	return s
}

// Write applies points as one Write call: all or nothing. It fails with a
// *PointError naming the first point that has a field kind conflict
// (against a stored series or an earlier point of the call, wrapping
// ErrFieldTypeConflict) or would create a series past a limit (wrapping
// ErrSeriesLimit), checked point by point and field by field as the
// engine does; then nothing is applied.
func (m *RefModel) Write(points []Point) error {
	pending := make(map[string]Kind)
	var perMeas map[string]int // series per measurement, counted on first need
	total := len(m.series)
	for i, p := range points {
		tags := sortedTags(p.Tags)
		for _, f := range p.Fields {
			key := point.SeriesKey(p.Measurement, tags, f.Key)
			k := f.Value.Kind()
			if s, ok := m.series[key]; ok {
				if s.kind != k {
					return &PointError{Index: i, Err: ErrFieldTypeConflict}
				}
				continue
			}
			if pk, ok := pending[key]; ok {
				if pk != k {
					return &PointError{Index: i, Err: ErrFieldTypeConflict}
				}
				continue
			}
			if perMeas == nil {
				perMeas = make(map[string]int)
				for _, s := range m.series {
					perMeas[s.measurement]++
				}
			}
			if (m.MaxSeries > 0 && total+1 > m.MaxSeries) ||
				(m.MaxSeriesPerMeasurement > 0 && perMeas[p.Measurement]+1 > m.MaxSeriesPerMeasurement) {
				return &PointError{Index: i, Err: ErrSeriesLimit}
			}
			pending[key] = k
			total++
			perMeas[p.Measurement]++
		}
	}
	for _, p := range points {
		tags := sortedTags(p.Tags)
		for _, f := range p.Fields {
			key := point.SeriesKey(p.Measurement, tags, f.Key)
			s, ok := m.series[key]
			if !ok {
				s = &refSeries{key: key, measurement: p.Measurement, tags: tags, field: f.Key,
					kind: f.Value.Kind(), samples: make(map[int64]Value)}
				m.series[key] = s
			}
			s.samples[p.Time] = f.Value
		}
	}
	return nil
}

// write is Write returning the index of the point it refused, or -1.
func (m *RefModel) write(points []Point) int {
	var pe *PointError
	if errors.As(m.Write(points), &pe) {
		return pe.Index
	}
	return -1
}

// matches reports whether sel selects s; measurement "" is any, as for
// the metadata calls and Last.
func (s *refSeries) matches(sel *Selector) bool {
	if (sel.Measurement != "" && s.measurement != sel.Measurement) || (sel.Field != "" && s.field != sel.Field) {
		return false
	}
	for _, w := range sel.Tags {
		if !slices.Contains(s.tags, w) {
			return false
		}
	}
	return modelMatchers(s.tags, sel.Matchers)
}

// modelMatchers applies PromQL matcher semantics by brute force: a missing
// key is "", a regexp must match the whole value.
func modelMatchers(tags []Tag, ms []Matcher) bool {
	for _, m := range ms {
		v := ""
		for _, t := range tags {
			if t.Key == m.Key {
				v = t.Value
			}
		}
		var ok bool
		switch m.Op {
		case MatchEqual:
			ok = v == m.Value
		case MatchNotEqual:
			ok = v != m.Value
		default:
			re := regexp.MustCompile("^(?:" + m.Value + ")$")
			ok = re.MatchString(v) == (m.Op == MatchRegexp)
		}
		if !ok {
			return false
		}
	}
	return true
}

// bucketOf returns the index of the bucket holding t, or -1.
func (s *refSeries) bucketOf(t int64) int {
	i, found := slices.BinarySearchFunc(s.buckets, t, func(b modelBucket, t int64) int { return cmp.Compare(b.start, t) })
	if found {
		return i
	}
	if i > 0 && t < s.buckets[i-1].start+s.buckets[i-1].every {
		return i - 1
	}
	return -1
}

// Delete applies a delete: raw samples in its range go, and buckets whose
// start it covers go whole, members and all.
func (m *RefModel) Delete(sel Selector) {
	for _, s := range m.series {
		if !s.matches(&sel) {
			continue
		}
		kept := s.buckets[:0]
		for _, b := range s.buckets {
			if !sel.Covers(b.start) {
				kept = append(kept, b)
				continue
			}
			for t := range s.samples {
				if t >= b.start && t-b.start < b.every {
					delete(s.samples, t)
				}
			}
		}
		s.buckets = kept
		for t := range s.samples {
			if sel.Covers(t) && s.bucketOf(t) < 0 {
				delete(s.samples, t)
			}
		}
	}
}

// delete is Delete.
func (m *RefModel) delete(sel Selector) { m.Delete(sel) }

// expire drops samples older than cutoff, as retention does.
func (m *RefModel) expire(cutoff int64) {
	for _, s := range m.series {
		for t := range s.samples {
			if t < cutoff {
				delete(s.samples, t)
			}
		}
	}
}

// samples counts the samples the model holds.
func (m *RefModel) samples() int {
	n := 0
	for _, s := range m.series {
		n += len(s.samples)
	}
	return n
}

// keepOf returns the retention of s in ns (0 = forever): its first
// matching rule's, or Retention.
func (m *RefModel) keepOf(s *refSeries) int64 {
	for _, r := range m.Rules {
		if (r.Measurement == "" || r.Measurement == s.measurement) && modelMatchers(s.tags, r.Matchers) {
			return int64(r.Keep)
		}
	}
	return m.Retention
}

// cutoffOf returns the oldest time visible in s: samples, and buckets
// starting, before it are hidden.
func (m *RefModel) cutoffOf(s *refSeries) int64 {
	c := m.Floor
	if keep := m.keepOf(s); keep > 0 {
		c = max(c, subSat(m.Now, keep))
	}
	return c
}

// sorted returns the samples of s in time order, members of buckets too.
func (s *refSeries) sorted() []Sample {
	out := make([]Sample, 0, len(s.samples))
	for t, v := range s.samples {
		out = append(out, Sample{Time: t, Value: v})
	}
	slices.SortFunc(out, func(a, b Sample) int { return cmp.Compare(a.Time, b.Time) })
	return out
}

// raw returns what a raw read of s in [lo, hi] returns: the visible
// samples outside buckets, and the last sample of each visible bucket.
func (m *RefModel) raw(s *refSeries, lo, hi int64) []Sample {
	cut := m.cutoffOf(s)
	var out []Sample
	all := s.sorted()
	for i := 0; i < len(all); i++ {
		x := all[i]
		if b := s.bucketOf(x.Time); b >= 0 {
			end := s.buckets[b].start + s.buckets[b].every
			for i+1 < len(all) && all[i+1].Time < end {
				i++
			}
			x = all[i]
			if s.buckets[b].start < cut {
				continue
			}
		} else if x.Time < cut {
			continue
		}
		if x.Time >= lo && x.Time <= hi {
			out = append(out, x)
		}
	}
	return out
}

// forAgg returns the samples of s an aggregate over [lo, hi] counts, in
// time order: visible samples outside buckets by their own time, and
// every member of each visible bucket whose start lies in the range, at
// that start.
func (m *RefModel) forAgg(s *refSeries, lo, hi int64) []refSample {
	cut := m.cutoffOf(s)
	var out []refSample
	for _, x := range s.sorted() {
		at := x.Time
		if b := s.bucketOf(x.Time); b >= 0 {
			at = s.buckets[b].start
		}
		if at >= cut && at >= lo && at <= hi {
			out = append(out, refSample{Sample: x, at: at, key: s.key})
		}
	}
	return out
}

func (m *RefModel) sortedSeries() []*refSeries {
	out := make([]*refSeries, 0, len(m.series))
	for _, s := range m.series {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *refSeries) int { return strings.Compare(a.key, b.key) })
	return out
}

func numericAgg(a Aggregate) bool {
	return a == AggSum || a == AggMean || a == AggMin || a == AggMax
}

// bucketStart is the epoch-aligned bucket of t, flooring for negative t.
func bucketStart(t, every int64) int64 {
	m := t % every
	if m < 0 {
		m += every
	}
	if t < math.MinInt64+m {
		return math.MinInt64 // the bucket starts below the int64 range
	}
	return t - m
}

// Query answers q per docs/design.md: raw, aggregated per series
// (GroupBy nil) or grouped.
func (m *RefModel) Query(q Query) []Series { return m.query(q, math.MinInt64) }

// query is Query with samples before cutoff hidden as well.
func (m *RefModel) query(q Query, cutoff int64) []Series {
	lo, hi := q.TimeRange()
	lo = max(lo, cutoff)
	var out []Series
	if q.Agg == AggNone {
		for _, s := range m.sortedSeries() {
			if !s.matches(&q.Selector) {
				continue
			}
			if ss := m.raw(s, lo, hi); len(ss) > 0 {
				out = append(out, Series{Measurement: s.measurement, Tags: slices.Clone(s.tags), Field: s.field, Samples: ss})
			}
		}
		return out
	}
	type group struct {
		tags    []Tag
		field   string
		samples []refSample
	}
	groups := map[string]*group{}
	for _, s := range m.sortedSeries() {
		if !s.matches(&q.Selector) || (numericAgg(q.Agg) && !s.kind.Numeric()) {
			continue
		}
		ss := m.forAgg(s, lo, hi)
		if len(ss) == 0 {
			continue
		}
		gt, gk := slices.Clone(s.tags), s.key
		if q.GroupBy != nil {
			gt = nil
			for _, k := range q.GroupBy {
				for _, tg := range s.tags {
					if tg.Key == k && !slices.Contains(gt, tg) {
						gt = append(gt, tg)
					}
				}
			}
			point.SortTags(gt)
			gk = point.SeriesKey(q.Measurement, gt, s.field)
		}
		g := groups[gk]
		if g == nil {
			g = &group{tags: gt, field: s.field}
			groups[gk] = g
		}
		g.samples = append(g.samples, ss...)
	}
	for _, gk := range sortedKeys(groups) {
		g := groups[gk]
		buckets := map[int64][]refSample{}
		for _, x := range g.samples {
			b := q.Start
			if q.Every > 0 {
				b = bucketStart(x.at, q.Every)
			}
			buckets[b] = append(buckets[b], x)
		}
		var bs []int64
		for b := range buckets {
			bs = append(bs, b)
		}
		slices.Sort(bs)
		var smps []Sample
		for _, b := range bs {
			smps = append(smps, aggregateGroup(q, b, buckets[b]))
		}
		out = append(out, Series{Measurement: q.Measurement, Tags: g.tags, Field: g.field, Samples: smps})
	}
	return out
}

// aggregateGroup reduces the samples of one query bucket b (of one series
// or of a group of them) per docs/design.md, "Aggregates" and
// "Grouping": kinds mixed in a group give float64, ties go to the
// earliest time and then to the series key that sorts first; with Every
// 0, first, last, min and max keep the picked sample's own time.
func aggregateGroup(q Query, b int64, ss []refSample) Sample {
	slices.SortFunc(ss, func(a, c refSample) int {
		return cmp.Or(cmp.Compare(a.Time, c.Time), strings.Compare(a.key, c.key))
	})
	kinds := map[Kind]bool{}
	for _, s := range ss {
		kinds[s.Value.Kind()] = true
	}
	mixed := len(kinds) > 1
	var v Value
	t := b
	switch q.Agg {
	case AggCount:
		v = Int(int64(len(ss)))
	case AggFirst:
		v, t = ss[0].Value, ss[0].Time
	case AggLast:
		// Latest time; on equal times the first series key.
		i := len(ss) - 1
		for i > 0 && ss[i-1].Time == ss[i].Time {
			i--
		}
		v, t = ss[i].Value, ss[i].Time
	case AggMean, AggSum:
		raw := make([]Sample, len(ss))
		for i := range ss {
			raw[i] = ss[i].Sample
		}
		f := exactSum(raw)
		if q.Agg == AggMean {
			v = Float(f / float64(len(ss)))
			break
		}
		switch k := ss[0].Value.Kind(); {
		case mixed || k == KindFloat:
			v = Float(f)
		case k == KindInt:
			v = Int(saturatingIntSum(raw))
		default:
			v = Uint(saturatingUintSum(raw))
		}
	case AggMin, AggMax:
		best := ss[0]
		for _, s := range ss[1:] {
			c := cmp.Compare(numFloat(s.Value), numFloat(best.Value))
			if s.Value.Kind() == best.Value.Kind() {
				c = 0
				if valueLess(s.Value, best.Value) {
					c = -1
				} else if valueLess(best.Value, s.Value) {
					c = 1
				}
			}
			if (q.Agg == AggMin && c < 0) || (q.Agg == AggMax && c > 0) {
				best = s
			}
		}
		v, t = best.Value, best.Time
		if mixed {
			v = Float(numFloat(v))
		}
	default:
		panic(fmt.Sprintf("aggregate %v", q.Agg))
	}
	if q.Every > 0 {
		t = b
	}
	return Sample{Time: t, Value: v}
}

// visible returns the series that sel selects (measurement "" = any)
// with a sample a raw read of sel's range returns, sorted by key, and
// for each the newest of those samples.
func (m *RefModel) visible(sel Selector) ([]*refSeries, []Sample) {
	lo, hi := sel.TimeRange()
	var out []*refSeries
	var last []Sample
	for _, s := range m.sortedSeries() {
		if !s.matches(&sel) {
			continue
		}
		if ss := m.raw(s, lo, hi); len(ss) > 0 {
			out = append(out, s)
			last = append(last, ss[len(ss)-1])
		}
	}
	return out, last
}

// Last answers DB.Last.
func (m *RefModel) Last(sel Selector) []Series {
	vis, last := m.visible(sel)
	var out []Series
	for i, s := range vis {
		out = append(out, Series{Measurement: s.measurement, Tags: slices.Clone(s.tags), Field: s.field, Samples: []Sample{last[i]}})
	}
	return out
}

// SeriesInfo answers DB.SeriesInfo.
func (m *RefModel) SeriesInfo(sel Selector) []SeriesInfo {
	vis, _ := m.visible(sel)
	var out []SeriesInfo
	for _, s := range vis {
		out = append(out, SeriesInfo{Measurement: s.measurement, Tags: slices.Clone(s.tags), Field: s.field, Kind: s.kind})
	}
	return out
}

// TagKeys answers DB.TagKeys.
func (m *RefModel) TagKeys(sel Selector) []string {
	vis, _ := m.visible(sel)
	set := map[string]bool{}
	for _, s := range vis {
		for _, tg := range s.tags {
			set[tg.Key] = true
		}
	}
	return sortedSet(set)
}

// TagValues answers DB.TagValues.
func (m *RefModel) TagValues(key string, sel Selector) []string {
	vis, _ := m.visible(sel)
	set := map[string]bool{}
	for _, s := range vis {
		for _, tg := range s.tags {
			if tg.Key == key {
				set[tg.Value] = true
			}
		}
	}
	return sortedSet(set)
}

// Measurements answers DB.Measurements.
func (m *RefModel) Measurements() []string {
	vis, _ := m.visible(Selector{})
	set := map[string]bool{}
	for _, s := range vis {
		set[s.measurement] = true
	}
	return sortedSet(set)
}

// SeriesCount is the number of series the model has created, as the
// limits count them.
func (m *RefModel) SeriesCount() int { return len(m.series) }

// LearnBuckets takes the rolled-up buckets stored in the database, by
// series key, as the model's, after checking them: every bucket belongs
// to a series of the model and reduces exactly the model's samples in its
// range (never half a bucket: the model holds every sample written and not
// deleted), buckets do not overlap, and a bucket the model knew is either
// still there, merged whole into a coarser one, or hidden (dropped by a
// delete, retention or the floor). Buckets starting before their series'
// cutoff are hidden; their contents are not checked, as compaction may
// have dropped some of their samples first. It returns what is wrong, or
// "".
func (m *RefModel) LearnBuckets(stored map[string][]segment.Rollup) string {
	for key := range stored {
		if m.series[key] == nil {
			return fmt.Sprintf("buckets of %q, a series the model does not know", key)
		}
	}
	for _, s := range m.sortedSeries() {
		rus := stored[s.key]
		cut := m.cutoffOf(s)
		all := s.sorted()
		var nb []modelBucket
		for i, ru := range rus {
			if ru.Every <= 0 || (i > 0 && ru.Start < rus[i-1].Start+rus[i-1].Every) {
				return fmt.Sprintf("%s: bucket %d at %d (every %d) overlaps the one before", s.key, i, ru.Start, ru.Every)
			}
			if ru.Start >= cut {
				want, n := refBucket(all, ru.Start, ru.Every)
				if n == 0 || !sameBucket(ru, want) {
					return fmt.Sprintf("%s bucket %d every %d:\n got %+v\nwant %+v (%d samples)", s.key, ru.Start, ru.Every, ru, want, n)
				}
			}
			nb = append(nb, modelBucket{ru.Start, ru.Every})
		}
		for _, ob := range s.buckets {
			in := -1
			for i, ru := range rus {
				if ru.Start < ob.start+ob.every && ob.start < ru.Start+ru.Every {
					in = i
					break
				}
			}
			switch {
			case in >= 0 && (rus[in].Start > ob.start || rus[in].Start+rus[in].Every < ob.start+ob.every):
				return fmt.Sprintf("%s: bucket %d every %d split by the stored one at %d every %d",
					s.key, ob.start, ob.every, rus[in].Start, rus[in].Every)
			case in < 0 && ob.start >= cut:
				return fmt.Sprintf("%s: visible bucket %d every %d lost", s.key, ob.start, ob.every)
			case in < 0:
				nb = append(nb, ob) // hidden for good: its members stay hidden
			}
		}
		slices.SortFunc(nb, func(a, b modelBucket) int { return cmp.Compare(a.start, b.start) })
		s.buckets = nb
	}
	return ""
}

// sameBucket reports whether two buckets hold the same statistics, sums
// bit for bit.
func sameBucket(a, b segment.Rollup) bool {
	return a.Start == b.Start && a.Every == b.Every && a.Count == b.Count &&
		a.SumF.Float64() == b.SumF.Float64() && a.SumI == b.SumI &&
		a.First == b.First && a.Last == b.Last && a.Min == b.Min && a.Max == b.Max &&
		a.FirstT == b.FirstT && a.LastT == b.LastT && a.MinT == b.MinT && a.MaxT == b.MaxT
}

// Reveal checks what a raw read of series key over [lo, hi] returned
// after a retention rule was lengthened, which shows again the samples
// compaction has not dropped yet, and takes it as the model's: each must
// be a sample the model holds (never a value a newer sample had
// overwritten), and the model forgets the others in the range. It works
// on series without buckets. It returns what is wrong, or "".
func (m *RefModel) Reveal(key string, lo, hi int64, got []Sample) string {
	s := m.series[key]
	if s == nil {
		return fmt.Sprintf("reveal of unknown series %q", key)
	}
	if len(s.buckets) > 0 {
		return fmt.Sprintf("reveal of %q, a series with buckets", key)
	}
	shown := map[int64]bool{}
	for _, x := range got {
		v, ok := s.samples[x.Time]
		if !ok || !v.Equal(x.Value) || x.Time < lo || x.Time > hi {
			return fmt.Sprintf("%s: shows %d=%v again, which the model does not hold (%v, %v)", key, x.Time, x.Value, v, ok)
		}
		shown[x.Time] = true
	}
	for t := range s.samples {
		if t >= lo && t <= hi && !shown[t] {
			delete(s.samples, t)
		}
	}
	return ""
}

// exactSum is the exact sum of numbers of any kind, computed with
// math/big and rounded once to the nearest float64, ties to even: the
// reference for float sums and for means.
func exactSum(ss []Sample) float64 {
	// Every float64 is an integer multiple of 2^-1074.
	var n big.Int
	for _, s := range ss {
		var v *big.Int
		switch s.Value.Kind() {
		case KindFloat:
			f := new(big.Float).SetFloat64(s.Value.Float())
			v, _ = f.SetMantExp(f, 1074).Int(nil)
		case KindInt:
			v = new(big.Int).Lsh(big.NewInt(s.Value.Int()), 1074)
		default:
			v = new(big.Int).Lsh(new(big.Int).SetUint64(s.Value.Uint()), 1074)
		}
		n.Add(&n, v)
	}
	if n.Sign() == 0 {
		return 0
	}
	f := new(big.Float).SetInt(&n)
	r, _ := f.SetMantExp(f, -1074).Float64()
	return r
}

func valueLess(a, b Value) bool {
	switch a.Kind() {
	case KindInt:
		return a.Int() < b.Int()
	case KindUint:
		return a.Uint() < b.Uint()
	}
	return a.Float() < b.Float()
}

// saturatingIntSum sums ints exactly and clamps to the int64 range.
func saturatingIntSum(ss []Sample) int64 {
	sum := new(big.Int)
	for _, s := range ss {
		sum.Add(sum, big.NewInt(s.Value.Int()))
	}
	switch {
	case sum.Cmp(big.NewInt(math.MaxInt64)) > 0:
		return math.MaxInt64
	case sum.Cmp(big.NewInt(math.MinInt64)) < 0:
		return math.MinInt64
	}
	return sum.Int64()
}

// saturatingUintSum sums uints exactly and clamps to math.MaxUint64.
func saturatingUintSum(ss []Sample) uint64 {
	sum := new(big.Int)
	for _, s := range ss {
		sum.Add(sum, new(big.Int).SetUint64(s.Value.Uint()))
	}
	if !sum.IsUint64() {
		return math.MaxUint64
	}
	return sum.Uint64()
}

func sortedSet(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
