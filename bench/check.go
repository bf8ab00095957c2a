package bench

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/stratadb/strata/engine"
)

// Names of the timed queries, as used in the JSON and CSV output.
const (
	QueryPoint = "point_query" // one series, one minute of raw samples
	QueryRange = "range_scan"  // every series, ten minutes of raw samples
	QueryAgg   = "agg_mean"    // 1-minute mean per device over the whole range
)

// NamedQuery is one of the timed queries.
type NamedQuery struct {
	Name  string
	Query engine.Query
}

// Queries returns the three timed queries on d: the point query reads field 0
// of device 42 (modulo Devices) over [t0+600s, t0+660s); the range scan reads
// every series over [t0+100s, t0+700s); the aggregate is the mean of field 0
// of every device in 1-minute buckets over the whole dataset. A dataset of
// fewer than 700 timestamps (the wide shape, the series sweep) would leave
// the first two empty, so their windows shrink with it: the point query
// reads the Steps*60/700 (at least one) timestamps from the middle one, the
// range scan those from Steps/7 to the end.
func (d *Dataset) Queries() []NamedQuery {
	dev := 42 % d.Devices
	pointFrom, pointTo, rangeFrom, rangeTo := 600, 660, 100, 700
	if d.Steps < 700 {
		pointFrom = d.Steps / 2
		pointTo = pointFrom + max(1, d.Steps*60/700)
		rangeFrom, rangeTo = d.Steps/7, d.Steps
	}
	return []NamedQuery{
		{QueryPoint, engine.Query{Selector: engine.Selector{
			Measurement: d.Measurement, Field: d.Fields[0], Tags: slices.Clone(d.tags[dev]),
			Start: d.Time(pointFrom), End: d.Time(pointTo),
		}}},
		{QueryRange, engine.Query{Selector: engine.Selector{
			Measurement: d.Measurement, Start: d.Time(rangeFrom), End: d.Time(rangeTo),
		}}},
		{QueryAgg, engine.Query{
			Selector: engine.Selector{Measurement: d.Measurement, Field: d.Fields[0], Start: d.Start, End: d.End()},
			Agg:      engine.AggMean,
			Every:    60 * int64(time.Second),
		}},
	}
}

// resultSet collects the rows of one query as an adapter produces them:
// series(key) starts (or resumes) a series, add appends a sample to it.
// Adapters fill it while the query is timed, so it only appends; the digest
// is computed after the clock stops.
type resultSet struct {
	keys []string
	rows []row
}

type row struct {
	series int32
	t      int64
	v      float64
}

func (r *resultSet) reset() {
	r.keys = r.keys[:0]
	r.rows = r.rows[:0]
}

func (r *resultSet) series(key string) int32 {
	r.keys = append(r.keys, key)
	return int32(len(r.keys) - 1)
}

func (r *resultSet) add(series int32, t int64, v float64) {
	r.rows = append(r.rows, row{series, t, v})
}

// Digest summarises a query result independently of row order, so that
// engines can be compared without shipping every row between processes.
// Rows, Series, TimeSum and KeyHash must match exactly; so must ValueHash
// for raw samples, which every engine stores losslessly. Means may differ in
// their last bits between engines (summation order), so for aggregates
// ValueSum and WeightedSum are compared with a relative tolerance of 1e-9.
// WeightedSum weighs each value by a hash of its series and time, so values
// moved to the wrong row change it even when their plain sum does not.
type Digest struct {
	Rows        int64   `json:"rows"`
	Series      int64   `json:"series"`
	TimeSum     int64   `json:"time_sum"`     // wraps on overflow
	KeyHash     uint64  `json:"key_hash"`     // sum of hash(series, time)
	ValueHash   uint64  `json:"value_hash"`   // sum of hash(series, time, value bits)
	ValueSum    float64 `json:"value_sum"`    // sum of values
	WeightedSum float64 `json:"weighted_sum"` // sum of weight(series, time) * value
}

// meanTolerance is the relative difference allowed between two means, and
// between the sums of the means of two answers.
const meanTolerance = 1e-9

func (r *resultSet) digest() Digest {
	var d Digest
	keyHash := make([]uint64, len(r.keys))
	for i, k := range r.keys {
		keyHash[i] = xxhash.Sum64String(k)
	}
	used := make([]bool, len(r.keys))
	for _, rw := range r.rows {
		used[rw.series] = true
		kt := mix(keyHash[rw.series] ^ mix(uint64(rw.t)))
		d.Rows++
		d.TimeSum += rw.t
		d.KeyHash += kt
		d.ValueHash += mix(kt ^ math.Float64bits(rw.v))
		d.ValueSum += rw.v
		d.WeightedSum += weight(kt) * rw.v
	}
	// Series counts the distinct keys that have rows: an adapter may start
	// the same series more than once.
	distinct := make(map[string]struct{})
	for i, u := range used {
		if u {
			distinct[r.keys[i]] = struct{}{}
		}
	}
	d.Series = int64(len(distinct))
	return d
}

// mix is the splitmix64 finaliser: a cheap bijective scramble of 64 bits.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// weight maps a row hash to [1, 2).
func weight(h uint64) float64 { return 1 + float64(h>>11)/(1<<53) }

// compare returns a description of the first difference between got and
// want, or "" when they match. exact demands bit-identical values.
func compare(got, want Digest, exact bool) string {
	switch {
	case got.Rows != want.Rows:
		return fmt.Sprintf("%d rows, want %d", got.Rows, want.Rows)
	case got.Series != want.Series:
		return fmt.Sprintf("%d series, want %d", got.Series, want.Series)
	case got.TimeSum != want.TimeSum || got.KeyHash != want.KeyHash:
		return "different (series, time) pairs"
	case exact && got.ValueHash != want.ValueHash:
		if got.ValueSum != want.ValueSum {
			return fmt.Sprintf("different values: sum %v, want %v", got.ValueSum, want.ValueSum)
		}
		return "different values (same sum)"
	case !near(got.ValueSum, want.ValueSum):
		return fmt.Sprintf("different values: sum %v, want %v", got.ValueSum, want.ValueSum)
	case !near(got.WeightedSum, want.WeightedSum):
		return "different values (same sum, moved between rows)"
	}
	return ""
}

func near(a, b float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= meanTolerance*max(math.Abs(a), math.Abs(b))
}

// ErrMismatch is matched by the error Run returns when an engine's query
// result differs from the reference.
var ErrMismatch = errors.New("bench: query results differ")

// CheckError reports an engine whose query result differs from the
// reference computed from the dataset itself.
type CheckError struct {
	Engine     string
	Config     Config
	Durability Durability
	Run        int
	Query      string
	Got, Want  Digest
	Reason     string
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("bench: %s returned a wrong %s (%s/%s, run %d): %s",
		e.Engine, e.Query, e.Config, e.Durability, e.Run, e.Reason)
}

// Unwrap lets errors.Is match ErrMismatch.
func (e *CheckError) Unwrap() error { return ErrMismatch }

// reference answers q from the dataset itself, in the order strata
// documents (series key, then time). It is the oracle every engine is
// checked against.
func (d *Dataset) reference(q engine.Query, rs *resultSet) error {
	if q.Measurement != d.Measurement {
		return nil
	}
	type series struct {
		key           string
		field, device int
	}
	var sel []series
	for j, f := range d.Fields {
		if q.Field != "" && q.Field != f {
			continue
		}
		for dev := range d.Devices {
			if tagsMatch(d.tags[dev], q.Tags) {
				sel = append(sel, series{d.SeriesKey(j, dev), j, dev})
			}
		}
	}
	slices.SortFunc(sel, func(a, b series) int { return strings.Compare(a.key, b.key) })
	first := max(0, ceilDiv(q.Start-d.Start, d.Interval))
	last := min(int64(d.Steps), ceilDiv(q.End-d.Start, d.Interval)) // exclusive
	for _, s := range sel {
		if first >= last {
			break
		}
		id := rs.series(s.key)
		switch q.Agg {
		case engine.AggNone:
			for step := first; step < last; step++ {
				rs.add(id, d.Time(int(step)), d.Value(s.field, s.device, int(step)))
			}
		case engine.AggMean:
			var m meanAcc
			for step := first; step < last; step++ {
				t := d.Time(int(step))
				if b := bucket(t, q.Every, q.Start); b != m.bucket || m.n == 0 {
					m.flush(rs, id)
					m.bucket = b
				}
				m.sum += d.Value(s.field, s.device, int(step))
				m.n++
			}
			m.flush(rs, id)
		default:
			return fmt.Errorf("bench: reference: unsupported aggregate %v", q.Agg)
		}
	}
	return nil
}

// verify checks every row of rs against the dataset itself: the row's
// series must be selected by q; a raw sample must be the dataset's sample at
// that time, bit for bit; a mean must be the mean of the dataset's samples in
// that bucket within 1e-9 relative. It returns a description of the first
// bad row, or "" when all are good. With the digest, which catches missing
// and duplicated rows, this makes the check exact per row without shipping
// rows between processes.
func (d *Dataset) verify(q engine.Query, rs *resultSet) string {
	type loc struct{ field, device int }
	index := make(map[string]loc, len(d.Fields)*d.Devices)
	for j := range d.Fields {
		for dev := range d.Devices {
			index[d.SeriesKey(j, dev)] = loc{j, dev}
		}
	}
	for n, rw := range rs.rows {
		key := rs.keys[rw.series]
		s, ok := index[key]
		if !ok || q.Measurement != d.Measurement || (q.Field != "" && q.Field != d.Fields[s.field]) || !tagsMatch(d.tags[s.device], q.Tags) {
			return fmt.Sprintf("row %d: series %q was not selected", n, key)
		}
		switch q.Agg {
		case engine.AggNone:
			step := (rw.t - d.Start) / d.Interval
			if rw.t < q.Start || rw.t >= q.End || (rw.t-d.Start)%d.Interval != 0 || step < 0 || step >= int64(d.Steps) {
				return fmt.Sprintf("row %d: %s has no sample at %d", n, key, rw.t)
			}
			if want := d.Value(s.field, s.device, int(step)); math.Float64bits(rw.v) != math.Float64bits(want) {
				return fmt.Sprintf("row %d: %s at %d is %v, want %v", n, key, rw.t, rw.v, want)
			}
		case engine.AggMean:
			lo, hi := q.Start, q.End
			if q.Every > 0 {
				if bucket(rw.t, q.Every, q.Start) != rw.t {
					return fmt.Sprintf("row %d: %s: %d is not a bucket start", n, key, rw.t)
				}
				lo, hi = max(lo, rw.t), min(hi, rw.t+q.Every)
			} else if rw.t != q.Start {
				return fmt.Sprintf("row %d: %s: bucket %d, want %d", n, key, rw.t, q.Start)
			}
			first := max(0, ceilDiv(lo-d.Start, d.Interval))
			last := min(int64(d.Steps), ceilDiv(hi-d.Start, d.Interval))
			if first >= last {
				return fmt.Sprintf("row %d: %s: bucket %d holds no sample", n, key, rw.t)
			}
			var sum float64
			for step := first; step < last; step++ {
				sum += d.Value(s.field, s.device, int(step))
			}
			if want := sum / float64(last-first); !near(rw.v, want) {
				return fmt.Sprintf("row %d: %s: mean of bucket %d is %v, want %v", n, key, rw.t, rw.v, want)
			}
		default:
			return fmt.Sprintf("unsupported aggregate %v", q.Agg)
		}
	}
	return ""
}

// answer feeds the samples an adapter reads into a resultSet as the query
// asks: each sample for AggNone, the mean of each bucket for AggMean. The
// adapter calls series for each series it answers, then add for its
// samples in time order, and flush at the end.
type answer struct {
	rs    *resultSet
	mean  bool
	every int64
	start int64
	id    int32
	m     meanAcc
}

// newAnswer returns an answer to q into rs, or errUnsupported for an
// aggregate other than AggNone and AggMean.
func newAnswer(q *engine.Query, rs *resultSet) (answer, error) {
	if q.Agg != engine.AggNone && q.Agg != engine.AggMean {
		return answer{}, errUnsupported
	}
	return answer{rs: rs, mean: q.Agg == engine.AggMean, every: q.Every, start: q.Start}, nil
}

// series starts the answer of the series with canonical key key.
func (a *answer) series(key string) {
	a.flush()
	a.id = a.rs.series(key)
}

// add adds a sample of the current series.
func (a *answer) add(t int64, v float64) {
	if !a.mean {
		a.rs.add(a.id, t, v)
		return
	}
	if b := bucket(t, a.every, a.start); b != a.m.bucket || a.m.n == 0 {
		a.m.flush(a.rs, a.id)
		a.m.bucket = b
	}
	a.m.sum += v
	a.m.n++
}

// flush ends the current series' last bucket.
func (a *answer) flush() { a.m.flush(a.rs, a.id) }

// meanAcc accumulates one bucket of a mean.
type meanAcc struct {
	bucket int64
	sum    float64
	n      int64
}

func (m *meanAcc) flush(rs *resultSet, id int32) {
	if m.n > 0 {
		rs.add(id, m.bucket, m.sum/float64(m.n))
	}
	m.sum, m.n = 0, 0
}

// bucket returns the start of t's bucket: buckets of width every are
// aligned to the Unix epoch, flooring for negative t. every == 0 means one
// bucket starting at start.
func bucket(t, every, start int64) int64 {
	if every <= 0 {
		return start
	}
	r := t % every
	if r < 0 {
		r += every
	}
	return t - r
}

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a > 0) == (b > 0) {
		q++
	}
	return q
}

// tagsMatch reports whether every filter tag is among tags.
func tagsMatch(tags, filter []engine.Tag) bool {
	for _, f := range filter {
		if !slices.Contains(tags, f) {
			return false
		}
	}
	return true
}
