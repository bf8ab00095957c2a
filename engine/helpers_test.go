package engine

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/internal/point"
)

// Helpers shared by the engine tests: options, open/reopen, a crash clone,
// a comparison of query results with the reference model's
// (refmodel_test.go), and the random workload of the model tests.

const (
	minTime = math.MinInt64
	maxTime = math.MaxInt64
)

var allAggs = []Aggregate{AggNone, AggCount, AggSum, AggMean, AggMin, AggMax, AggFirst, AggLast}

// quietOptions returns default options with a silent logger.
func quietOptions() *Options {
	return &Options{Logger: slog.New(slog.DiscardHandler)}
}

// openDB opens dir and closes the DB when the test ends, unless the test
// closed it itself.
func openDB(t testing.TB, dir string, opts *Options) *DB {
	t.Helper()
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if !db.closed.Load() {
			db.Close()
		}
	})
	return db
}

// reopen closes db and opens dir again.
func reopen(t testing.TB, db *DB, dir string, opts *Options) *DB {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return openDB(t, dir, opts)
}

// crashCopy copies the files of an open database to a new directory, as a
// crash would leave them: nothing is closed or flushed first. Callers make
// sure no background flush or compaction runs during the copy (large
// MemTableBytes, DisableBackgroundCompaction), so the copy is a consistent
// instant, like a kill -9.
func crashCopy(t testing.TB, dir string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "crash")
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		t.Fatalf("copy %s: %v", dir, err)
	}
	return dst
}

func mustWrite(t testing.TB, db *DB, points ...Point) {
	t.Helper()
	if err := db.Write(points); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func mustFlush(t testing.TB, db *DB) {
	t.Helper()
	if err := db.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

func mustCompact(t testing.TB, db *DB) {
	t.Helper()
	if err := db.Compact(); err != nil {
		t.Fatalf("compact: %v", err)
	}
}

func mustDelete(t testing.TB, db *DB, sel Selector) {
	t.Helper()
	if err := db.Delete(context.Background(), sel); err != nil {
		t.Fatalf("delete %+v: %v", sel, err)
	}
}

func mustQuery(t testing.TB, db *DB, q Query) []Series {
	t.Helper()
	res, err := db.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("query %+v: %v", q, err)
	}
	return res
}

// rawAll selects every sample of measurement.
func rawAll(measurement string) Query {
	return Query{Selector: Selector{Measurement: measurement, Start: minTime, End: maxTime}}
}

// pt builds a one-field point.
func pt(measurement string, tags []Tag, field string, v Value, t int64) Point {
	return Point{Measurement: measurement, Tags: tags, Fields: []Field{{Key: field, Value: v}}, Time: t}
}

// samplesOf returns the samples of the one series a query returned, failing
// the test if it returned another number of series.
func samplesOf(t testing.TB, res []Series) []Sample {
	t.Helper()
	if len(res) != 1 {
		t.Fatalf("got %d series, want 1: %s", len(res), formatSeries(res))
	}
	return res[0].Samples
}

func formatSeries(res []Series) string {
	var b strings.Builder
	for _, s := range res {
		fmt.Fprintf(&b, "\n  %s:", point.SeriesKey(s.Measurement, s.Tags, s.Field))
		for i, smp := range s.Samples {
			if i == 8 {
				fmt.Fprintf(&b, " ...(%d)", len(s.Samples))
				break
			}
			fmt.Fprintf(&b, " %d=%s", smp.Time, smp.Value.String())
		}
	}
	return b.String()
}

// valuesMatch compares one result value, bit for bit: sums and means are
// exact sums rounded once, whatever the order the engine added them in.
func valuesMatch(_ Aggregate, got, want Value) bool {
	return got.Equal(want)
}

// diffResults describes the first difference between got and want, or
// returns "" when they match.
func diffResults(agg Aggregate, got, want []Series) string {
	for i := 0; i < max(len(got), len(want)); i++ {
		if i >= len(got) {
			return fmt.Sprintf("missing series %d %s", i, point.SeriesKey(want[i].Measurement, want[i].Tags, want[i].Field))
		}
		if i >= len(want) {
			return fmt.Sprintf("extra series %d %s", i, point.SeriesKey(got[i].Measurement, got[i].Tags, got[i].Field))
		}
		g, w := &got[i], &want[i]
		gk, wk := point.SeriesKey(g.Measurement, g.Tags, g.Field), point.SeriesKey(w.Measurement, w.Tags, w.Field)
		if gk != wk || g.Measurement != w.Measurement || g.Field != w.Field || !slices.Equal(g.Tags, w.Tags) {
			return fmt.Sprintf("series %d is %q (tags %v), want %q (tags %v)", i, gk, g.Tags, wk, w.Tags)
		}
		for j := 0; j < max(len(g.Samples), len(w.Samples)); j++ {
			if j >= len(g.Samples) {
				return fmt.Sprintf("series %q: missing sample %d: %d=%v (got %d samples, want %d)",
					wk, j, w.Samples[j].Time, w.Samples[j].Value, len(g.Samples), len(w.Samples))
			}
			if j >= len(w.Samples) {
				return fmt.Sprintf("series %q: extra sample %d: %d=%v (got %d samples, want %d)",
					wk, j, g.Samples[j].Time, g.Samples[j].Value, len(g.Samples), len(w.Samples))
			}
			gs, ws := g.Samples[j], w.Samples[j]
			if gs.Time != ws.Time || !valuesMatch(agg, gs.Value, ws.Value) {
				return fmt.Sprintf("series %q sample %d: got %d=%v (%v), want %d=%v (%v)",
					wk, j, gs.Time, gs.Value, gs.Value.Kind(), ws.Time, ws.Value, ws.Value.Kind())
			}
		}
	}
	return ""
}

// checkQuery runs q on db and compares it with the model's answer.
func checkQuery(t testing.TB, db *DB, m *RefModel, q Query, cutoff int64, where string) {
	t.Helper()
	got, err := db.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: query %s: %v", where, formatQuery(q), err)
	}
	want := m.query(q, cutoff)
	if d := diffResults(q.Agg, got, want); d != "" {
		t.Fatalf("%s: query %s: %s", where, formatQuery(q), d)
	}
	seq, err := joinSeq(db, q)
	if err != nil {
		t.Fatalf("%s: QuerySeq %s: %v", where, formatQuery(q), err)
	}
	if d := diffResults(q.Agg, seq, want); d != "" {
		t.Fatalf("%s: QuerySeq %s, parts joined: %s", where, formatQuery(q), d)
	}
	if q.Agg == AggNone && q.GroupBy == nil {
		scanned, err := joinScan(db, q.Selector)
		if err != nil {
			t.Fatalf("%s: Scan %s: %v", where, formatQuery(q), err)
		}
		if d := diffResults(q.Agg, scanned, want); d != "" {
			t.Fatalf("%s: Scan %s, runs joined: %s", where, formatQuery(q), d)
		}
	}
}

// scanSplits counts the series that Scan yielded in more than one run.
var scanSplits atomic.Int64

// joinScan collects Scan's runs as Series, appending each run to the
// series it continues, and checks what every run must satisfy: columns
// as long as Times, only the column of the series' kind, times rising
// within and across the runs of a series.
func joinScan(db *DB, sel Selector) ([]Series, error) {
	var out []Series
	prev := ""
	for c, err := range db.Scan(context.Background(), sel) {
		if err != nil {
			return nil, err
		}
		if c.Len() == 0 {
			return nil, fmt.Errorf("empty run of %s", c.Measurement)
		}
		lens := []int{len(c.Floats), len(c.Ints), len(c.Uints), len(c.Bools), len(c.Strings)}
		kinds := []Kind{KindFloat, KindInt, KindUint, KindBool, KindString}
		for i, n := range lens {
			if (kinds[i] == c.Kind) != (n == c.Len()) || (kinds[i] != c.Kind && n != 0) {
				return nil, fmt.Errorf("run of kind %v has %d %v values for %d times", c.Kind, n, kinds[i], c.Len())
			}
		}
		samples := make([]Sample, c.Len())
		for i := range samples {
			samples[i] = c.Sample(i)
			if i > 0 && c.Times[i] <= c.Times[i-1] {
				return nil, fmt.Errorf("run times not rising at %d", i)
			}
		}
		key := point.SeriesKey(c.Measurement, c.Tags, c.Field)
		if len(out) > 0 && key == prev {
			last := &out[len(out)-1]
			if samples[0].Time <= last.Samples[len(last.Samples)-1].Time {
				return nil, fmt.Errorf("run of %q does not continue its series in time order", key)
			}
			scanSplits.Add(1)
			last.Samples = append(last.Samples, samples...)
			continue
		}
		out = append(out, Series{Measurement: c.Measurement, Tags: slices.Clone(c.Tags), Field: c.Field, Samples: samples})
		prev = key
	}
	return out, nil
}

// seqSplits counts the series that QuerySeq yielded in more than one part.
var seqSplits atomic.Int64

// joinSeq collects QuerySeq's results, appending each part to the series
// it continues, and checks that parts continue in time order.
func joinSeq(db *DB, q Query) ([]Series, error) {
	var out []Series
	prev := ""
	for s, err := range db.QuerySeq(context.Background(), q) {
		if err != nil {
			return nil, err
		}
		key := point.SeriesKey(s.Measurement, s.Tags, s.Field)
		if len(out) > 0 && key == prev {
			last := &out[len(out)-1]
			if len(s.Samples) == 0 || s.Samples[0].Time <= last.Samples[len(last.Samples)-1].Time {
				return nil, fmt.Errorf("part of %q does not continue its series in time order", key)
			}
			seqSplits.Add(1)
			last.Samples = append(last.Samples, s.Samples...)
			continue
		}
		out = append(out, s)
		prev = key
	}
	return out, nil
}

func formatQuery(q Query) string {
	return fmt.Sprintf("{%s field=%q tags=%v matchers=%v [%d,%d) %v every=%d group=%q}",
		q.Measurement, q.Field, q.Tags, q.Matchers, q.Start, q.End, q.Agg, q.Every, q.GroupBy)
}

// wellFormed checks what any query result must satisfy, whatever the data:
// series sorted by key and matching the selector, samples sorted by time
// inside the range or bucket-aligned.
func wellFormed(q Query, res []Series) string {
	prev := ""
	for i, s := range res {
		key := point.SeriesKey(s.Measurement, s.Tags, s.Field)
		if i > 0 && key <= prev {
			return fmt.Sprintf("series %q after %q", key, prev)
		}
		prev = key
		if s.Measurement != q.Measurement || (q.Field != "" && s.Field != q.Field) {
			return fmt.Sprintf("series %q does not match the selector", key)
		}
		if !slices.IsSortedFunc(s.Tags, func(a, b Tag) int { return strings.Compare(a.Key, b.Key) }) {
			return fmt.Sprintf("series %q: tags not sorted", key)
		}
		if len(s.Samples) == 0 {
			return fmt.Sprintf("series %q has no samples", key)
		}
		for j, smp := range s.Samples {
			if j > 0 && smp.Time <= s.Samples[j-1].Time {
				return fmt.Sprintf("series %q: sample times not increasing at %d", key, j)
			}
			switch {
			case q.Agg == AggNone:
				if smp.Time < q.Start || smp.Time >= q.End {
					return fmt.Sprintf("series %q: sample %d outside [%d, %d)", key, smp.Time, q.Start, q.End)
				}
			case q.Every == 0:
				selector := q.Agg == AggFirst || q.Agg == AggLast || q.Agg == AggMin || q.Agg == AggMax
				if (!selector && smp.Time != q.Start) || (selector && !q.Covers(smp.Time)) || len(s.Samples) != 1 {
					return fmt.Sprintf("series %q: Every=0 gave %d samples, first at %d", key, len(s.Samples), smp.Time)
				}
			default:
				if bucketStart(smp.Time, q.Every) != smp.Time {
					return fmt.Sprintf("series %q: bucket %d not aligned to %d", key, smp.Time, q.Every)
				}
			}
			if q.Agg == AggCount && smp.Value.Kind() != KindInt {
				return fmt.Sprintf("series %q: count of kind %v", key, smp.Value.Kind())
			}
			if q.Agg == AggMean && smp.Value.Kind() != KindFloat {
				return fmt.Sprintf("series %q: mean of kind %v", key, smp.Value.Kind())
			}
		}
	}
	return ""
}

// --- random workload ---

// gen makes random points, selectors and queries over a small, fixed
// universe of measurements, tag sets and fields, with keys that need
// escaping in the canonical form.
type gen struct {
	r            *rand.Rand
	measurements []string
	tagSets      map[string][][]Tag
	fields       []string
	homeKind     map[string]Kind
}

var (
	genMeasurements = []string{"cpu", "mem", "disk io", "net,if"}
	genTagKeys      = []string{"host", "region", "k=v"}
	genTagValues    = []string{"a", "b", "c d", "e,f"}
	genFields       = []string{"f", "g", "i", "u", "b", "s", "x y"}
	genHomeKinds    = []Kind{KindFloat, KindFloat, KindInt, KindUint, KindBool, KindString, KindFloat}
	genStrings      = []string{"", "ok", "warn", "line\nbreak", "ünïcode", "a,b c=d"}
)

func newGen(r *rand.Rand) *gen {
	g := &gen{r: r, measurements: genMeasurements, tagSets: make(map[string][][]Tag),
		fields: genFields, homeKind: make(map[string]Kind)}
	for i, f := range genFields {
		g.homeKind[f] = genHomeKinds[i]
	}
	for _, m := range genMeasurements {
		seen := map[string]bool{}
		for len(g.tagSets[m]) < 5 {
			var tags []Tag
			for _, k := range genTagKeys {
				if r.IntN(2) == 0 {
					tags = append(tags, Tag{Key: k, Value: genTagValues[r.IntN(len(genTagValues))]})
				}
			}
			id := fmt.Sprint(tags)
			if !seen[id] {
				seen[id] = true
				g.tagSets[m] = append(g.tagSets[m], tags)
			}
		}
	}
	return g
}

func (g *gen) value(k Kind) Value {
	r := g.r
	switch k {
	case KindFloat:
		v := r.Float64()*2000 - 1000
		if r.IntN(2) == 0 {
			v = math.Round(v*100) / 100
		}
		return Float(v)
	case KindInt:
		return Int(r.Int64N(2_000_000_000) - 1_000_000_000)
	case KindUint:
		return Uint(r.Uint64N(2_000_000_000))
	case KindBool:
		return Bool(r.IntN(2) == 0)
	default:
		return String(genStrings[r.IntN(len(genStrings))])
	}
}

// time returns a timestamp in about [-300 µs, 300 µs], mostly on a 1 µs grid,
// and now and then one at the edges of the int64 range (math.MaxInt64
// itself too), where buckets are clamped or end exactly at math.MaxInt64.
func (g *gen) time() int64 {
	if g.r.IntN(20) == 0 {
		switch g.r.IntN(3) {
		case 0:
			return math.MinInt64 + g.r.Int64N(30_000)
		case 1:
			return math.MaxInt64 - g.r.Int64N(30_000)
		default:
			return math.MaxInt64
		}
	}
	t := (g.r.Int64N(601) - 300) * 1000
	if g.r.IntN(5) == 0 {
		t += g.r.Int64N(1000)
	}
	return t
}

func (g *gen) point() Point {
	r := g.r
	m := g.measurements[r.IntN(len(g.measurements))]
	sets := g.tagSets[m]
	tags := slices.Clone(sets[r.IntN(len(sets))])
	r.Shuffle(len(tags), func(i, j int) { tags[i], tags[j] = tags[j], tags[i] })
	p := Point{Measurement: m, Tags: tags, Time: g.time()}
	for _, i := range r.Perm(len(g.fields))[:1+r.IntN(3)] {
		f := g.fields[i]
		p.Fields = append(p.Fields, Field{Key: f, Value: g.value(g.homeKind[f])})
	}
	return p
}

// batch returns 1..12 points; now and then one field has an unusual kind,
// which either conflicts or fixes an odd kind for a new series.
func (g *gen) batch() []Point {
	pts := make([]Point, 1+g.r.IntN(12))
	for i := range pts {
		pts[i] = g.point()
	}
	if g.r.IntN(12) == 0 {
		p := &pts[g.r.IntN(len(pts))]
		f := &p.Fields[g.r.IntN(len(p.Fields))]
		f.Value = g.value(Kind(1 + g.r.IntN(5)))
	}
	return pts
}

func (g *gen) selector() Selector {
	r := g.r
	m := g.measurements[r.IntN(len(g.measurements))]
	sel := Selector{Measurement: m}
	if r.IntN(2) == 0 {
		sel.Field = g.fields[r.IntN(len(g.fields))]
	}
	switch x := r.IntN(10); {
	case x < 4:
		sets := g.tagSets[m]
		set := sets[r.IntN(len(sets))]
		if len(set) > 0 {
			n := 1 + r.IntN(len(set))
			sel.Tags = slices.Clone(set[:n])
		}
	case x < 5:
		sel.Tags = []Tag{{Key: genTagKeys[r.IntN(len(genTagKeys))], Value: genTagValues[r.IntN(len(genTagValues))]}}
	}
	if r.IntN(8) == 0 {
		sel.Start, sel.End = minTime, maxTime
	} else {
		// Widened by up to 20 µs each way, within the int64 range; End
		// is at most math.MaxInt64.
		a, b := g.time(), g.time()
		if a > math.MinInt64+20_000 {
			a -= g.r.Int64N(20_000)
		}
		if b < math.MaxInt64-20_000 {
			b += g.r.Int64N(20_000)
		}
		if a > b {
			a, b = b, a
		}
		if b == math.MaxInt64 {
			b--
		}
		if a > b {
			a = b
		}
		sel.Start, sel.End = a, b+1
	}
	return sel
}

var genEvery = []int64{1, 3, 1000, 7000, 60_000, 250_000}

func (g *gen) every() int64 { return genEvery[g.r.IntN(len(genEvery))] }
