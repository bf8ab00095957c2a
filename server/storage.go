package server

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/promname"
)

// Storage is a Prometheus storage.Queryable over a strata database, so that
// the PromQL engine (and anything else that reads Prometheus storage) can
// query it. The mapping:
//
//   - A series of measurement m, field f and tags is the Prometheus series
//     __name__ = "m_f" (just "m" when f is "value", so that what remote
//     write stored reads back under its own name), with the tags as labels.
//     A tag key that is no valid label name has each invalid character
//     replaced by '_' (a leading digit too); a tag key that would become
//     __name__ is left out. Keys of a series that become one label name
//     give one label, their values joined by ';' in key order.
//   - Float, int and uint samples are float64; a bool is 0 or 1. String
//     fields are not visible.
//   - Timestamps become milliseconds by flooring; where two samples of a
//     series fall in one millisecond, the later one in time is the one
//     seen.
//   - Where two strata series map to one label set (say measurement "a"
//     field "b_value" and measurement "a_b" field "value"), they are read
//     as one series; in a millisecond both have, the one whose canonical
//     key sorts last wins.
//
// Selects return series sorted by label set. Matchers and time ranges are
// pushed down: the metric name picks the measurements to read, label
// matchers become engine.Matchers (where a label is the tag key itself),
// and the range becomes the Selector's.
type Storage struct {
	db *engine.DB
}

// NewStorage returns the Prometheus view of db.
func NewStorage(db *engine.DB) *Storage { return &Storage{db: db} }

// Querier returns a querier over [mint, maxt] (ms, inclusive).
func (s *Storage) Querier(mint, maxt int64) (storage.Querier, error) {
	return &querier{db: s.db, mint: mint, maxt: maxt}, nil
}

// StorageError is a failure of the database under a query; the HTTP API
// answers it by its cause (engine.ErrInvalid 400, engine.ErrClosed 503,
// anything else 500) rather than as a PromQL execution error (422).
type StorageError struct{ Err error }

func (e *StorageError) Error() string { return e.Err.Error() }
func (e *StorageError) Unwrap() error { return e.Err }

func storageErr(err error) error {
	if err == nil {
		return nil
	}
	return &StorageError{Err: err}
}

type querier struct {
	db         *engine.DB
	mint, maxt int64
}

func (q *querier) Close() error { return nil }

// nsRange converts the inclusive ms range [mint, maxt] to a Selector's
// half-open ns range. ok is false for an empty range.
func nsRange(mint, maxt int64) (start, end int64, ok bool) {
	if mint > maxt {
		return 0, 0, false
	}
	const k = int64(1e6)
	lowAll := mint <= math.MinInt64/k
	highAll := maxt >= math.MaxInt64/k
	switch {
	case lowAll && highAll:
		return 0, 0, true // all time
	case lowAll:
		start = math.MinInt64
	default:
		start = mint * k
	}
	if highAll {
		end = math.MaxInt64
	} else {
		end = (maxt + 1) * k
	}
	if start == 0 && end == 0 {
		return 0, 0, false
	}
	return start, end, true
}

// promSeries is a strata series that the matchers selected.
type promSeries struct {
	key         string // canonical strata series key
	measurement string
	field       string
	labels      labels.Labels
}

// MetricName returns the Prometheus metric name of measurement m, field f:
// m_f, or m when f is "value". The rule is internal/promname's, which the
// forwarder shares.
func MetricName(m, f string) string { return promname.Metric(m, f) }

// LabelName returns the label name of tag key k: k with every character
// that is not valid in a label name replaced by '_' (one '_' per character,
// and per byte of invalid UTF-8; "" becomes "_"). The rule is
// internal/promname's, which the forwarder shares, so that a forwarded
// series has the labels the query API shows.
func LabelName(k string) string { return promname.Label(k) }

// promLabels builds the label set of a strata series. Tag keys that become
// one label name (say "host.name" and "host_name") give one label, their
// values joined by ';' in the order of the keys, as Prometheus' OTLP
// translator joins attributes whose names collide: a label set never holds
// a name twice.
func promLabels(b *labels.ScratchBuilder, m, f string, tags []engine.Tag) labels.Labels {
	b.Reset()
	b.Add(labels.MetricName, MetricName(m, f))
	renamed := false
	for _, t := range tags {
		n := LabelName(t.Key)
		if n == labels.MetricName {
			continue
		}
		if n != t.Key {
			renamed = true
		}
		b.Add(n, t.Value)
	}
	b.Sort()
	ls := b.Labels()
	if !renamed {
		return ls // distinct keys, kept as they are: no collision
	}
	if _, dup := ls.HasDuplicateLabelNames(); !dup {
		return ls
	}
	// Rare: join the colliding values, in key order (tags are sorted by
	// key, which Sort above may not have kept).
	ps := make([]labels.Label, 0, len(tags))
	for _, t := range tags {
		if n := LabelName(t.Key); n != labels.MetricName {
			ps = append(ps, labels.Label{Name: n, Value: t.Value})
		}
	}
	slices.SortStableFunc(ps, func(x, y labels.Label) int { return strings.Compare(x.Name, y.Name) })
	b.Reset()
	b.Add(labels.MetricName, MetricName(m, f))
	for i := 0; i < len(ps); {
		j, v := i+1, ps[i].Value
		for ; j < len(ps) && ps[j].Name == ps[i].Name; j++ {
			v += ";" + ps[j].Value
		}
		b.Add(ps[i].Name, v)
		i = j
	}
	b.Sort()
	return b.Labels()
}

// candidateMeasurements returns the measurements whose series can have a
// name that the __name__ matchers accept.
func (q *querier) candidateMeasurements(ctx context.Context, ms []*labels.Matcher) ([]string, error) {
	all, err := q.db.Measurements(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if m.Name != labels.MetricName {
			continue
		}
		var names []string
		switch m.Type {
		case labels.MatchEqual:
			names = []string{m.Value}
		case labels.MatchRegexp:
			names = m.SetMatches()
		}
		if names == nil {
			continue
		}
		// The name of a series of measurement x is x or x_<field>.
		all = slices.DeleteFunc(all, func(x string) bool {
			for _, n := range names {
				if n == x || strings.HasPrefix(n, x+"_") {
					return false
				}
			}
			return true
		})
	}
	return all, nil
}

// pushdown returns the matchers of ms that the engine can apply to
// measurement m's series as they are: those on a label that is a tag key
// itself (no other key of m maps to that label).
func (q *querier) pushdown(ctx context.Context, m string, start, end int64, ms []*labels.Matcher) ([]engine.Matcher, error) {
	var out []engine.Matcher
	var keys []string
	for _, lm := range ms {
		if lm.Name == labels.MetricName || LabelName(lm.Name) != lm.Name {
			continue
		}
		if keys == nil {
			var err error
			if keys, err = q.db.TagKeys(ctx, engine.Selector{Measurement: m, Start: start, End: end}); err != nil {
				return nil, err
			}
			if keys == nil {
				keys = []string{}
			}
		}
		exact := true
		for _, k := range keys {
			if k != lm.Name && LabelName(k) == lm.Name {
				exact = false
				break
			}
		}
		if !exact {
			continue
		}
		var op engine.MatchOp
		switch lm.Type {
		case labels.MatchEqual:
			op = engine.MatchEqual
		case labels.MatchNotEqual:
			op = engine.MatchNotEqual
		case labels.MatchRegexp:
			op = engine.MatchRegexp
		case labels.MatchNotRegexp:
			op = engine.MatchNotRegexp
		default:
			continue
		}
		out = append(out, engine.Matcher{Key: lm.Name, Op: op, Value: lm.Value})
	}
	return out, nil
}

// plan returns the visible series in [mint, maxt] that ms select, grouped
// by measurement, with the engine matchers used for each measurement.
func (q *querier) plan(ctx context.Context, mint, maxt int64, ms []*labels.Matcher) ([]measurementPlan, error) {
	start, end, ok := nsRange(mint, maxt)
	if !ok {
		return nil, nil
	}
	meas, err := q.candidateMeasurements(ctx, ms)
	if err != nil {
		return nil, err
	}
	var plans []measurementPlan
	b := labels.NewScratchBuilder(8)
	for _, m := range meas {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pushed, err := q.pushdown(ctx, m, start, end, ms)
		if err != nil {
			return nil, err
		}
		sel := engine.Selector{Measurement: m, Matchers: pushed, Start: start, End: end}
		infos, err := q.db.SeriesInfo(ctx, sel)
		if err != nil {
			return nil, err
		}
		p := measurementPlan{sel: sel}
		for _, info := range infos {
			if info.Kind == engine.KindString {
				continue
			}
			ls := promLabels(&b, info.Measurement, info.Field, info.Tags)
			if !matchAll(ms, ls) {
				continue
			}
			p.series = append(p.series, promSeries{
				key:         engine.SeriesKey(info.Measurement, info.Tags, info.Field),
				measurement: info.Measurement,
				field:       info.Field,
				labels:      ls,
			})
		}
		if len(p.series) > 0 {
			plans = append(plans, p)
		}
	}
	return plans, nil
}

type measurementPlan struct {
	sel    engine.Selector
	series []promSeries
}

func matchAll(ms []*labels.Matcher, ls labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(ls.Get(m.Name)) {
			return false
		}
	}
	return true
}

// Select returns the series that ms select, sorted by label set (whatever
// sortSeries says).
func (q *querier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	if hints != nil {
		mint, maxt = max(mint, hints.Start), min(maxt, hints.End)
	}
	plans, err := q.plan(ctx, mint, maxt, ms)
	if err != nil {
		return storage.ErrSeriesSet(storageErr(err))
	}
	var out []*memSeries
	labelsOnly := hints != nil && hints.Func == "series"
	for _, p := range plans {
		want := make(map[string]labels.Labels, len(p.series))
		var field string
		for i, s := range p.series {
			want[s.key] = s.labels
			if i == 0 {
				field = s.field
			} else if field != s.field {
				field = ""
			}
		}
		if labelsOnly {
			for _, s := range p.series {
				out = append(out, &memSeries{lbls: s.labels, key: s.key})
			}
			continue
		}
		sel := p.sel
		sel.Field = field
		// Scan hands over columns: the samples go straight to
		// milliseconds, with no engine.Sample in between. Runs of one
		// series come one after the other.
		var cur *memSeries
		var curKey string
		for c, err := range q.db.Scan(ctx, sel) {
			if err != nil {
				return storage.ErrSeriesSet(storageErr(err))
			}
			if c.Kind == engine.KindString {
				continue
			}
			if key := engine.SeriesKey(c.Measurement, c.Tags, c.Field); cur == nil || key != curKey {
				curKey = key
				cur = nil
				if ls, ok := want[key]; ok {
					cur = &memSeries{lbls: ls, key: key}
					out = append(out, cur)
				}
			}
			if cur != nil {
				cur.samples = appendMillis(cur.samples, c)
			}
		}
	}
	return newSeriesSet(out)
}

// appendMillis appends the samples of a run of numeric or boolean values
// to dst in ms, the later sample in time winning within a millisecond
// (also across the runs of one series, which continue in time order).
func appendMillis(dst fsamples, c *engine.Columns) fsamples {
	dst = slices.Grow(dst, c.Len())
	for i, ns := range c.Times {
		var v float64
		switch c.Kind {
		case engine.KindFloat:
			v = c.Floats[i]
		case engine.KindInt:
			v = float64(c.Ints[i])
		case engine.KindUint:
			v = float64(c.Uints[i])
		case engine.KindBool:
			if c.Bools[i] {
				v = 1
			}
		}
		t := floorDiv(ns, int64(time.Millisecond))
		if n := len(dst); n > 0 && dst[n-1].t == t {
			dst[n-1].f = v
			continue
		}
		dst = append(dst, fsample{t, v})
	}
	return dst
}

// floatOf is v as the query API sees it: bool as 0 or 1; a string is not
// a number.
func floatOf(v engine.Value) (float64, bool) { return promname.Value(v) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// newSeriesSet sorts series by label set and merges those with equal ones.
func newSeriesSet(ss []*memSeries) storage.SeriesSet {
	slices.SortStableFunc(ss, func(a, b *memSeries) int {
		if c := labels.Compare(a.lbls, b.lbls); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	out := ss[:0]
	for _, s := range ss {
		if n := len(out); n > 0 && labels.Equal(out[n-1].lbls, s.lbls) {
			out[n-1] = mergeSeries(out[n-1], s)
			continue
		}
		out = append(out, s)
	}
	return &seriesSet{series: out, i: -1}
}

// mergeSeries merges b into a; in a millisecond both have, b wins.
func mergeSeries(a, b *memSeries) *memSeries {
	m := &memSeries{lbls: a.lbls, key: b.key}
	x, y := a.samples, b.samples
	for len(x) > 0 || len(y) > 0 {
		switch {
		case len(y) == 0 || len(x) > 0 && x[0].t < y[0].t:
			m.samples, x = append(m.samples, x[0]), x[1:]
		case len(x) == 0 || y[0].t < x[0].t:
			m.samples, y = append(m.samples, y[0]), y[1:]
		default:
			m.samples, x, y = append(m.samples, y[0]), x[1:], y[1:]
		}
	}
	return m
}

// LabelNames returns the label names of the series ms select, sorted.
func (q *querier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return q.collectLabels(ctx, hints, ms, func(lbls labels.Labels, set map[string]struct{}) {
		lbls.Range(func(l labels.Label) { set[l.Name] = struct{}{} })
	})
}

// LabelValues returns the values of label name among the series ms select,
// sorted, without "".
func (q *querier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return q.collectLabels(ctx, hints, ms, func(lbls labels.Labels, set map[string]struct{}) {
		if v := lbls.Get(name); v != "" {
			set[v] = struct{}{}
		}
	})
}

// collectLabels returns, sorted and limited as hints ask, the strings add
// puts in the set for the labels of each series ms select.
func (q *querier) collectLabels(ctx context.Context, hints *storage.LabelHints, ms []*labels.Matcher,
	add func(lbls labels.Labels, set map[string]struct{})) ([]string, annotations.Annotations, error) {
	plans, err := q.plan(ctx, q.mint, q.maxt, ms)
	if err != nil {
		return nil, nil, storageErr(err)
	}
	set := map[string]struct{}{}
	for _, p := range plans {
		for _, s := range p.series {
			add(s.labels, set)
		}
	}
	return limitSorted(set, hints), nil, nil
}

func limitSorted(set map[string]struct{}, hints *storage.LabelHints) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	if hints != nil && hints.Limit > 0 && len(out) > hints.Limit {
		out = out[:hints.Limit]
	}
	return out
}

// memSeries is a series read into memory.
type memSeries struct {
	lbls    labels.Labels
	key     string
	samples fsamples
}

func (s *memSeries) Labels() labels.Labels { return s.lbls }

func (s *memSeries) Iterator(chunkenc.Iterator) chunkenc.Iterator {
	return storage.NewListSeriesIterator(s.samples)
}

type seriesSet struct {
	series []*memSeries
	i      int
}

func (ss *seriesSet) Next() bool {
	if ss.i+1 >= len(ss.series) {
		ss.i = len(ss.series)
		return false
	}
	ss.i++
	return true
}

func (ss *seriesSet) At() storage.Series                { return ss.series[ss.i] }
func (ss *seriesSet) Err() error                        { return nil }
func (ss *seriesSet) Warnings() annotations.Annotations { return nil }

// fsample is a float sample; a pointer to one is a chunks.Sample.
type fsample struct {
	t int64
	f float64
}

func (s *fsample) T() int64                      { return s.t }
func (s *fsample) ST() int64                     { return 0 }
func (s *fsample) F() float64                    { return s.f }
func (s *fsample) H() *histogram.Histogram       { return nil }
func (s *fsample) FH() *histogram.FloatHistogram { return nil }
func (s *fsample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s *fsample) Copy() chunks.Sample           { c := *s; return &c }

// fsamples are the samples of a series, sorted by time.
type fsamples []fsample

func (s fsamples) Get(i int) chunks.Sample { return &s[i] }
func (s fsamples) Len() int                { return len(s) }
