package server

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/value"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/point"
)

// Why a remote-write series is refused: the reason label of
// strata_remote_write_series_refused_total. The first five are Prometheus'
// own receiver's rules (a metric name, valid UTF-8, no empty or duplicate
// label name) and the engine's tag limit; the others are the engine's
// refusals of a series those rules let through.
const (
	refusedMissingName    = iota // no __name__ label, or an empty one
	refusedEmptyLabelName        // a label named ""
	refusedInvalidUTF8           // a label name or value that is not UTF-8
	refusedDuplicateLabel        // two labels of one name ({a="", a="x"} too)
	refusedTooManyLabels         // more than maxRemoteLabels labels
	refusedInvalid               // the engine's ErrInvalid (a newline, a key too long, ...)
	refusedTypeConflict          // the series holds another kind than float
	refusedEngine                // another refusal of the engine, e.g. a limit
	numRefused
)

var refusedReasons = [numRefused]string{
	"missing_name", "empty_label_name", "invalid_utf8", "duplicate_label", "too_many_labels",
	"invalid", "type_conflict", "engine",
}

// wholeRetries is how many series of a batch the engine may refuse before
// the points ahead of a refused one are written on their own, so that a
// batch of many refused series costs linear, not quadratic, work.
const wholeRetries = 8

// remoteStore stores the series of one remote-write request and keeps what
// the answer and the metrics need. It appends the samples to an engine
// appender (remote_append.go): each series is resolved once, its samples
// appended by ref, and the request is one Commit (one every
// remoteCommitSamples samples for a larger one). Where a Commit is refused
// for a point (a series limit, a kind another writer set meanwhile) the
// rest of the request, from that Commit's first sample, goes through
// db.Write in batches of remoteBatch points instead, which names the
// refused series one by one. What it holds does not grow with the request:
// the appender's batch, the Write path's batch, the refusal counts and the
// first maxReportedLines messages.
type remoteStore struct {
	s   *Server
	raw []byte // the request

	// The appender path (nil app: the Write path).
	app     point.SampleAppender
	ref     engine.SeriesRef // of the series being read, 0 until resolved
	tags    []engine.Tag     // scratch of resolve
	off     int              // offset in raw of the series being read
	read    int              // its samples read so far, skipped ones too
	pending int              // samples appended since cp
	cp      remoteMark       // where the pending batch starts

	// The Write path.
	pts    []engine.Point
	fields []engine.Field
	series []int32 // ordinal in the request of each point's series
	cur    int32   // ordinal of the series being read
	// curRefused is set when the engine refused the series being read, in
	// a batch written before its last sample: its other samples are
	// skipped.
	curRefused bool
	retries    int // series refused by the engine in this batch

	remoteCounts
}

// remoteCounts is what a request skipped and refused.
type remoteCounts struct {
	stored, stale, nonFinite, outOfRange int
	refused                              [numRefused]int
	nRejected                            int      // refused series and out-of-range samples
	msgs                                 []string // the first maxReportedLines reasons
}

func newRemoteStore(s *Server) *remoteStore {
	return &remoteStore{s: s, app: s.remoteAppender()}
}

// store writes the series of the WriteRequest raw, which checkWriteRequest
// accepted. It returns a failure of the engine; what it refused is in st.
func (st *remoteStore) store(raw []byte) error {
	st.raw = raw
	if st.app != nil {
		defer st.s.putRemoteAppender(st.app)
		err := st.appendAll()
		if !errors.Is(err, errRemoteFallback) {
			return err
		}
		st.app = nil
		return st.writeFrom(st.cp)
	}
	return st.writeFrom(remoteMark{})
}

// writeFrom stores the series of the request from mark on through db.Write.
func (st *remoteStore) writeFrom(mark remoteMark) error {
	n := min(remoteBatch, max(st.samplesFrom(mark), 1))
	st.pts = make([]engine.Point, 0, n)
	st.fields = make([]engine.Field, 0, n)
	st.series = make([]int32, 0, n)
	skip := mark.skip
	scratch := make([]wireLabel, 0, 16)
	err := eachSeriesFrom(st.raw, mark.off, scratch, func(_ int, labels []wireLabel, tooMany bool, ts []byte) error {
		err := st.add(labels, tooMany, ts, skip)
		skip = 0
		return err
	})
	if err != nil {
		return err
	}
	return st.flush()
}

// samplesFrom is about the number of samples of the request from mark on.
func (st *remoteStore) samplesFrom(mark remoteMark) int {
	n, _, _ := checkWriteRequest(st.raw[mark.off:])
	return n
}

// count adds what the request skipped and refused to the metrics.
func (st *remoteStore) count() {
	m := st.s.metrics
	m.remoteSamples.Add(float64(st.stored))
	if st.stale > 0 {
		m.remoteStale.Add(float64(st.stale))
	}
	if st.nonFinite > 0 {
		m.remoteNonFinite.Add(float64(st.nonFinite))
	}
	if st.outOfRange > 0 {
		m.remoteOutOfRange.Add(float64(st.outOfRange))
	}
	for i, n := range st.refused {
		if n > 0 {
			m.remoteRefused[i].Add(float64(n))
		}
	}
}

// refuseLabels refuses the series when its labels cannot be stored (too
// many of them, or one that checkLabels rejects) and reports whether it
// did.
func (st *remoteStore) refuseLabels(labels []wireLabel, tooMany bool) bool {
	if tooMany {
		st.refuse(refusedTooManyLabels, labels, nil)
		return true
	}
	if reason, what := checkLabels(labels); reason >= 0 {
		st.refuse(reason, labels, what)
		return true
	}
	return false
}

// add reads one series through the Write path: labels as sent, ts its
// encoding, of which the first skip samples were stored already.
func (st *remoteStore) add(labels []wireLabel, tooMany bool, ts []byte, skip int) error {
	st.cur++
	st.curRefused = false
	if st.refuseLabels(labels, tooMany) {
		return nil
	}
	var name string
	var tags []engine.Tag
	it := sampleIter{b: ts}
	for it.next() {
		if skip > 0 {
			skip--
			continue
		}
		if st.curRefused {
			break
		}
		if !st.keep(labels, it.t, it.v) {
			continue
		}
		if name == "" {
			name, tags = seriesStrings(labels)
		}
		st.fields = append(st.fields, engine.Field{Key: "value", Value: engine.Float(it.v)})
		st.pts = append(st.pts, engine.Point{
			Measurement: name,
			Tags:        tags,
			Fields:      st.fields[len(st.fields)-1:],
			Time:        it.t * msNanos,
		})
		st.series = append(st.series, st.cur)
		if len(st.pts) == cap(st.pts) {
			if err := st.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// keep reports whether the sample (t ms, v) of the series labels is to be
// stored, and counts it where it is not: staleness markers, other NaN and
// infinite values, and times out of the range of ns.
func (st *remoteStore) keep(labels []wireLabel, t int64, v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		if value.IsStaleNaN(v) {
			st.stale++
		} else {
			st.nonFinite++
		}
		return false
	}
	if t > math.MaxInt64/msNanos || t < math.MinInt64/msNanos {
		st.outOfRange++
		if st.reject() {
			st.msgs = append(st.msgs, fmt.Sprintf("series %s: timestamp %d ms out of range", wireSeriesName(labels), t))
		}
		return false
	}
	return true
}

// checkLabels applies Prometheus' receiver's rules to the labels of a
// series (it sorts them by name). It returns the reason to refuse the
// series, and the label name at fault, or -1.
func checkLabels(labels []wireLabel) (reason int, what []byte) {
	names, emptyName := 0, false
	for _, l := range labels {
		switch {
		case len(l.name) == 0:
			return refusedEmptyLabelName, nil
		case !utf8.Valid(l.name):
			return refusedInvalidUTF8, l.name
		case !utf8.Valid(l.value):
			return refusedInvalidUTF8, l.name
		case string(l.name) == "__name__":
			names++
			emptyName = emptyName || len(l.value) == 0
		}
	}
	if names == 0 || emptyName {
		return refusedMissingName, nil
	}
	byName := func(a, b wireLabel) int { return bytes.Compare(a.name, b.name) }
	if !slices.IsSortedFunc(labels, byName) {
		slices.SortFunc(labels, byName)
	}
	for i := 1; i < len(labels); i++ {
		if bytes.Equal(labels[i].name, labels[i-1].name) {
			return refusedDuplicateLabel, labels[i].name
		}
	}
	return -1, nil
}

// seriesStrings returns the metric name and the tags (the other labels,
// sorted, without empty values, which Prometheus treats as absent) of
// labels that checkLabels accepted. They share one allocation.
func seriesStrings(labels []wireLabel) (string, []engine.Tag) {
	size, n := 0, 0
	for _, l := range labels {
		if string(l.name) == "__name__" {
			size += len(l.value)
		} else if len(l.value) > 0 {
			size += len(l.name) + len(l.value)
			n++
		}
	}
	buf := make([]byte, 0, size)
	var name string
	tags := make([]engine.Tag, 0, n)
	for _, l := range labels {
		if string(l.name) == "__name__" {
			buf = append(buf, l.value...)
		} else if len(l.value) > 0 {
			buf = append(buf, l.name...)
			buf = append(buf, l.value...)
		}
	}
	all := string(buf)
	off := 0
	for _, l := range labels {
		if string(l.name) == "__name__" {
			name = all[off : off+len(l.value)]
			off += len(l.value)
		} else if len(l.value) > 0 {
			k := all[off : off+len(l.name)]
			off += len(l.name)
			tags = append(tags, engine.Tag{Key: k, Value: all[off : off+len(l.value)]})
			off += len(l.value)
		}
	}
	return name, tags
}

// refuse counts a series refused for reason before anything of it was
// batched.
func (st *remoteStore) refuse(reason int, labels []wireLabel, what []byte) {
	st.refused[reason]++
	if !st.reject() {
		return
	}
	var why string
	switch reason {
	case refusedMissingName:
		why = "no __name__ label"
	case refusedEmptyLabelName:
		why = "empty label name"
	case refusedInvalidUTF8:
		why = fmt.Sprintf("label %q: invalid UTF-8", what)
	case refusedDuplicateLabel:
		why = fmt.Sprintf("duplicate label name %q", what)
	case refusedTooManyLabels:
		why = fmt.Sprintf("more than %d labels", maxRemoteLabels)
	}
	st.msgs = append(st.msgs, fmt.Sprintf("series %s: %s", wireSeriesName(labels), why))
}

// reject counts a refusal and reports whether its message is to be kept:
// the first maxReportedLines are.
func (st *remoteStore) reject() bool {
	st.nRejected++
	return len(st.msgs) < maxReportedLines
}

// flush writes the batch and starts a new one.
func (st *remoteStore) flush() error {
	err := st.write(st.pts, st.series)
	clear(st.pts) // drop the references to the series' strings
	st.pts, st.fields, st.series = st.pts[:0], st.fields[:0], st.series[:0]
	st.retries = 0
	return err
}

// write hands pts to the engine. When the engine refuses a point, every
// point of its series is left out (they share its fault), the series is
// counted, and the others are written again.
func (st *remoteStore) write(pts []engine.Point, series []int32) error {
	for len(pts) > 0 {
		err := st.s.db.Write(pts)
		if err == nil {
			st.stored += len(pts)
			return nil
		}
		var pe *engine.PointError
		if !errors.As(err, &pe) || pe.Index < 0 || pe.Index >= len(pts) {
			return err
		}
		i, bad := pe.Index, series[pe.Index]
		reason := refusedEngine
		switch {
		case errors.Is(pe.Err, engine.ErrInvalid):
			reason = refusedInvalid
		case errors.Is(pe.Err, engine.ErrFieldTypeConflict):
			reason = refusedTypeConflict
		}
		st.refused[reason]++
		if st.reject() {
			st.msgs = append(st.msgs, fmt.Sprintf("series %s: %v", pointSeriesName(&pts[i]), pe.Err))
		}
		if bad == st.cur {
			st.curRefused = true
		}
		if st.retries++; st.retries > wholeRetries && i > 0 {
			// Many refusals in this batch: write the points ahead of the
			// refused one by themselves, so that each point is offered a
			// bounded number of times.
			hp, hs := dropSeries(pts[:i], series[:i], bad)
			if err := st.write(hp, hs); err != nil {
				return err
			}
			pts, series = dropSeries(pts[i+1:], series[i+1:], bad)
			continue
		}
		pts, series = dropSeries(pts, series, bad)
	}
	return nil
}

// dropSeries removes, in place, the points of series bad.
func dropSeries(pts []engine.Point, series []int32, bad int32) ([]engine.Point, []int32) {
	k := 0
	for j := range pts {
		if series[j] != bad {
			pts[k], series[k] = pts[j], series[j]
			k++
		}
	}
	clear(pts[k:])
	return pts[:k], series[:k]
}

// maxSeriesName is about the longest series name an error message shows.
const maxSeriesName = 200

// wireSeriesName formats labels for an error message.
func wireSeriesName(labels []wireLabel) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range labels {
		if i > 0 {
			b.WriteByte(',')
		}
		if len(l.name) > 0 && utf8.Valid(l.name) {
			fmt.Fprintf(&b, "%s=%q", l.name, l.value)
		} else {
			fmt.Fprintf(&b, "%q=%q", l.name, l.value)
		}
		if b.Len() > maxSeriesName {
			b.WriteString("...")
			break
		}
	}
	b.WriteByte('}')
	return b.String()
}

// pointSeriesName formats the series of p for an error message.
func pointSeriesName(p *engine.Point) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{__name__=%q", p.Measurement)
	for _, t := range p.Tags {
		fmt.Fprintf(&b, ",%s=%q", t.Key, t.Value)
		if b.Len() > maxSeriesName {
			b.WriteString("...")
			break
		}
	}
	b.WriteByte('}')
	return b.String()
}
