package bench

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// testEngines returns the engines the end-to-end tests run: all of them,
// except strata while its engine.Open is still the "not implemented" stub.
// Any other failure of strata's Open fails the test.
func testEngines(t testing.TB) []string {
	t.Helper()
	db, err := engine.Open(t.TempDir(), nil)
	if err != nil {
		if strings.Contains(err.Error(), "not implemented") {
			t.Logf("strata left out: %v", err)
			return []string{EngineSQLite, EngineLevelDB, EnginePebble}
		}
		t.Fatalf("strata: open: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("strata: close: %v", err)
	}
	return Engines()
}

type sortedRow struct {
	key string
	t   int64
	v   float64
}

func (r *resultSet) sorted() []sortedRow {
	out := make([]sortedRow, len(r.rows))
	for i, rw := range r.rows {
		out[i] = sortedRow{r.keys[rw.series], rw.t, rw.v}
	}
	slices.SortFunc(out, func(a, b sortedRow) int {
		return cmp.Or(strings.Compare(a.key, b.key), cmp.Compare(a.t, b.t))
	})
	return out
}

// TestAdapters writes a small set of points with negative, out-of-order and
// overwritten timestamps, unsorted tags and two fields into every engine,
// reopens it and checks the answers of raw, filtered and mean queries.
func TestAdapters(t *testing.T) {
	mk := func(host string, ts int64, f1, f2 float64) engine.Point {
		return engine.Point{
			Measurement: "m",
			Tags:        []engine.Tag{{Key: "zone", Value: "z1"}, {Key: "host", Value: host}},
			Fields:      []engine.Field{{Key: "f1", Value: engine.Float(f1)}, {Key: "f2", Value: engine.Float(f2)}},
			Time:        ts,
		}
	}
	batches := [][]engine.Point{
		{mk("a", 5, 1, 10), mk("b", -1, 2, 20), mk("a", -3e9, 3, 30)},
		{mk("a", 0, 4, 40), mk("b", 2e9, 5, 50), mk("a", 5, 6, 60)}, // a@5 is overwritten
	}
	const a1, a2 = "m,host=a,zone=z1 f1", "m,host=a,zone=z1 f2"
	const b1, b2 = "m,host=b,zone=z1 f1", "m,host=b,zone=z1 f2"
	all := engine.Selector{Measurement: "m", Start: -1e10, End: 1e10}
	cases := []struct {
		name string
		q    engine.Query
		want []sortedRow
	}{
		{"raw", engine.Query{Selector: all}, []sortedRow{
			{a1, -3e9, 3}, {a1, 0, 4}, {a1, 5, 6},
			{a2, -3e9, 30}, {a2, 0, 40}, {a2, 5, 60},
			{b1, -1, 2}, {b1, 2e9, 5},
			{b2, -1, 20}, {b2, 2e9, 50},
		}},
		{"half-open", engine.Query{Selector: engine.Selector{Measurement: "m", Field: "f1", Start: -1, End: 5}}, []sortedRow{
			{a1, 0, 4}, {b1, -1, 2},
		}},
		{"series", engine.Query{Selector: engine.Selector{Measurement: "m", Field: "f2",
			Tags: []engine.Tag{{Key: "zone", Value: "z1"}, {Key: "host", Value: "a"}}, Start: 0, End: 6}}, []sortedRow{
			{a2, 0, 40}, {a2, 5, 60},
		}},
		{"mean", engine.Query{Selector: engine.Selector{Measurement: "m", Field: "f1", Start: -1e10, End: 1e10},
			Agg: engine.AggMean, Every: 2e9}, []sortedRow{
			{a1, -4e9, 3}, {a1, 0, 5}, {b1, -2e9, 2}, {b1, 2e9, 5},
		}},
		{"other measurement", engine.Query{Selector: engine.Selector{Measurement: "x", Start: -1e10, End: 1e10}}, nil},
	}
	for _, name := range testEngines(t) {
		if name == EnginePrometheus {
			continue // milliseconds, in order: TestPrometheusAdapter
		}
		t.Run(name, func(t *testing.T) {
			open, err := lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			for _, dur := range []Durability{Fast, Durable} {
				db, err := open(dir, ConfigDefault, dur)
				if err != nil {
					t.Fatal(err)
				}
				for _, b := range batches {
					if err := db.write(b); err != nil {
						t.Fatal(err)
					}
				}
				if err := db.close(); err != nil {
					t.Fatal(err)
				}
			}
			db, err := open(dir, ConfigEqualMemory, Fast)
			if err != nil {
				t.Fatal(err)
			}
			defer db.close()
			for _, c := range cases {
				var rs resultSet
				if err := db.query(context.Background(), c.q, &rs); err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if got := rs.sorted(); !slices.Equal(got, c.want) {
					t.Errorf("%s:\n got %v\nwant %v", c.name, got, c.want)
				}
			}
		})
	}
}

func TestKVKeyOrder(t *testing.T) {
	times := []int64{-1 << 62, -3e9, -1, 0, 1, 5, 2e9, 1<<63 - 1}
	var keys []string
	for _, id := range []uint64{1, 2} {
		for _, ts := range times {
			k := dataKey(nil, id, ts)
			gotID, gotT, ok := decodeDataKey(k)
			if !ok || gotID != id || gotT != ts {
				t.Fatalf("decode(%x) = %d, %d, %v", k, gotID, gotT, ok)
			}
			keys = append(keys, string(k))
		}
	}
	if !slices.IsSorted(keys) {
		t.Error("data keys do not sort by (series, time)")
	}
	if string(dictKey(nil, 1<<40)) >= string(dictUpper) || string(dictKey(nil, 1)) < string(dictLower) || string(dictUpper) > keys[0] {
		t.Error("dictionary keys are not below every data key")
	}
}

func smallDataset(t testing.TB) *Dataset {
	ds, err := IoT(20_000, 20, 1)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func TestReference(t *testing.T) {
	ds := smallDataset(t)
	qs := ds.Queries()
	var rs resultSet
	if err := ds.reference(qs[0].Query, &rs); err != nil {
		t.Fatal(err)
	}
	rows := rs.sorted()
	if len(rows) != 60 || rows[0].key != ds.SeriesKey(0, 2) || rows[0].t != Start+600e9 || rows[59].t != Start+659e9 {
		t.Fatalf("point query: %d rows, first %v", len(rows), rows[0])
	}
	for i, r := range rows {
		if r.v != ds.Value(0, 2, 600+i) {
			t.Fatalf("point query row %d: %v, want %v", i, r.v, ds.Value(0, 2, 600+i))
		}
	}

	rs.reset()
	if err := ds.reference(qs[1].Query, &rs); err != nil {
		t.Fatal(err)
	}
	if d := rs.digest(); d.Rows != 20*600 || d.Series != 20 {
		t.Fatalf("range scan: %d rows, %d series", d.Rows, d.Series)
	}

	// t0 is 20 s past a minute boundary: the first bucket holds 40
	// samples, the next ones 60, the last the 20 left of 1000.
	rs.reset()
	if err := ds.reference(qs[2].Query, &rs); err != nil {
		t.Fatal(err)
	}
	rows = rs.sorted()
	if len(rows) != 20*17 {
		t.Fatalf("mean: %d rows, want %d", len(rows), 20*17)
	}
	key0 := ds.SeriesKey(0, 0)
	var sum float64
	for s := range 40 {
		sum += ds.Value(0, 0, s)
	}
	if rows[0].key != key0 || rows[0].t != Start-20e9 || rows[0].v != sum/40 {
		t.Errorf("first bucket %v, want {%s %d %v}", rows[0], key0, Start-20e9, sum/40)
	}
	sum = 0
	for s := 40; s < 100; s++ {
		sum += ds.Value(0, 0, s)
	}
	if rows[1].t != Start+40e9 || !near(rows[1].v, sum/60) {
		t.Errorf("second bucket %v, want {%d %v}", rows[1], Start+40e9, sum/60)
	}
}

func TestDigest(t *testing.T) {
	ds := smallDataset(t)
	var ref resultSet
	if err := ds.reference(ds.Queries()[1].Query, &ref); err != nil {
		t.Fatal(err)
	}
	want := ref.digest()
	// variant copies the reference, lets f change it and returns the
	// comparison with the reference.
	variant := func(f func(r *resultSet)) string {
		r := resultSet{keys: slices.Clone(ref.keys), rows: slices.Clone(ref.rows)}
		f(&r)
		return compare(r.digest(), want, true)
	}
	if d := variant(func(r *resultSet) {
		slices.Reverse(r.rows) // order does not matter
		// Nor does a series being restarted under the same key.
		r.rows[0].series = r.series(r.keys[r.rows[0].series])
	}); d != "" {
		t.Errorf("reordered rows differ: %s", d)
	}
	for name, f := range map[string]func(r *resultSet){
		"value":   func(r *resultSet) { r.rows[100].v += 0.01 },
		"tiny":    func(r *resultSet) { r.rows[100].v = nextUp(r.rows[100].v) },
		"swap":    func(r *resultSet) { r.rows[1].v, r.rows[2].v = r.rows[2].v, r.rows[1].v },
		"time":    func(r *resultSet) { r.rows[5].t += 1e9 },
		"dropped": func(r *resultSet) { r.rows = r.rows[1:] },
		"doubled": func(r *resultSet) { r.rows = append(r.rows, r.rows[7]) },
		"series":  func(r *resultSet) { r.keys[3] = "sensor,device_id=dev-9999,site=site-09 temperature" },
	} {
		if ref.rows[1].v == ref.rows[2].v {
			t.Fatal("swap needs two different values")
		}
		if d := variant(f); d == "" {
			t.Errorf("%s: change not detected", name)
		}
	}
	// Aggregates tolerate rounding differences but not a wrong mean.
	var agg resultSet
	if err := ds.reference(ds.Queries()[2].Query, &agg); err != nil {
		t.Fatal(err)
	}
	aggWant := agg.digest()
	orig := agg.rows[3].v
	agg.rows[3].v = nextUp(orig)
	if d := compare(agg.digest(), aggWant, false); d != "" {
		t.Errorf("one ulp in a mean rejected: %s", d)
	}
	agg.rows[3].v *= 1 + 1e-6
	if d := compare(agg.digest(), aggWant, false); d == "" {
		t.Error("a mean off by 1e-6 relative passed")
	}
	agg.rows[3].v = orig
	if agg.rows[4].v == agg.rows[5].v {
		t.Fatal("swap needs two different means")
	}
	agg.rows[4].v, agg.rows[5].v = agg.rows[5].v, agg.rows[4].v
	if d := compare(agg.digest(), aggWant, false); d == "" {
		t.Error("moved means passed")
	}
}

func nextUp(v float64) float64 { return math.Nextafter(v, math.Inf(1)) }

// brokenStore answers queries like the store it wraps, then lets mutate
// spoil the answer.
type brokenStore struct {
	store
	mutate func(q engine.Query, rs *resultSet)
}

func (b *brokenStore) query(ctx context.Context, q engine.Query, rs *resultSet) error {
	if err := b.store.query(ctx, q, rs); err != nil {
		return err
	}
	b.mutate(q, rs)
	return nil
}

// withBroken registers an engine "broken" that is LevelDB with wrong
// query answers.
func withBroken(t *testing.T, mutate func(q engine.Query, rs *resultSet)) {
	openers["broken"] = func(dir string, cfg Config, dur Durability) (store, error) {
		s, err := openLevelDB(dir, cfg, dur)
		if err != nil {
			return nil, err
		}
		return &brokenStore{s, mutate}, nil
	}
	t.Cleanup(func() { delete(openers, "broken") })
}

func TestBrokenAdapterFailsCheck(t *testing.T) {
	cases := []struct {
		query  string
		mutate func(q engine.Query, rs *resultSet)
	}{
		{QueryRange, func(q engine.Query, rs *resultSet) {
			if q.Agg == engine.AggNone && q.Field == "" {
				rs.rows[len(rs.rows)/2].v += 0.01
			}
		}},
		{QueryPoint, func(q engine.Query, rs *resultSet) {
			if len(q.Tags) > 0 {
				rs.rows = rs.rows[:len(rs.rows)-1]
			}
		}},
		{QueryAgg, func(q engine.Query, rs *resultSet) {
			if q.Agg == engine.AggMean {
				rs.rows[7].v *= 1 + 1e-7
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.query, func(t *testing.T) {
			withBroken(t, c.mutate)
			rep, err := Run(context.Background(), Options{
				Points: 2_000, Devices: 2, Batch: 500, Runs: 1,
				Engines:      []string{EngineSQLite, "broken"},
				Durabilities: []Durability{Fast}, Configs: []Config{ConfigDefault},
				Dir: t.TempDir(),
			})
			if !errors.Is(err, ErrMismatch) {
				t.Fatalf("Run: %v, want ErrMismatch", err)
			}
			var ce *CheckError
			if !errors.As(err, &ce) || ce.Engine != "broken" || ce.Query != c.query {
				t.Fatalf("error %v: want a CheckError for broken's %s", err, c.query)
			}
			if !strings.Contains(err.Error(), "broken") || strings.Contains(err.Error(), EngineSQLite) {
				t.Errorf("error %q should name broken and only broken", err)
			}
			if rep == nil || len(rep.Results) != 2 {
				t.Errorf("report %+v: want the figures despite the mismatch", rep)
			}
		})
	}
}

func TestRunOptionErrors(t *testing.T) {
	for _, o := range []Options{
		{Engines: []string{"mysql"}},
		{Points: 1001},
		{Durabilities: []Durability{"sometimes"}},
		{Configs: []Config{"huge"}},
		{Shape: "csv"},
		{Fields: -1},
	} {
		if _, err := Run(context.Background(), o); err == nil || errors.Is(err, ErrMismatch) {
			t.Errorf("Run(%+v) = %v, want a usage error", o, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := Run(ctx, Options{Points: 1000, Devices: 10, Runs: 1, Engines: []string{EngineSQLite},
		Dir: "/proc/none"}); err == nil {
		t.Error("unusable scratch directory accepted")
	}
}

func TestVerify(t *testing.T) {
	ds := smallDataset(t)
	for _, nq := range ds.Queries() {
		var ref resultSet
		if err := ds.reference(nq.Query, &ref); err != nil {
			t.Fatal(err)
		}
		if msg := ds.verify(nq.Query, &ref); msg != "" {
			t.Fatalf("%s: the reference fails: %s", nq.Name, msg)
		}
		exact := nq.Query.Agg == engine.AggNone
		for name, c := range map[string]struct {
			f    func(r *resultSet)
			pass bool
		}{
			"one ulp":       {func(r *resultSet) { r.rows[3].v = nextUp(r.rows[3].v) }, !exact},
			"1e-7 relative": {func(r *resultSet) { r.rows[3].v *= 1 + 1e-7 }, false},
			"time":          {func(r *resultSet) { r.rows[3].t += 1 }, false},
			"early":         {func(r *resultSet) { r.rows[0].t = nq.Query.Start - 60e9 }, false},
			"late":          {func(r *resultSet) { r.rows[0].t = nq.Query.End + 60e9 }, false},
			"unselected":    {func(r *resultSet) { r.keys[0] = ds.SeriesKey(0, 0) + "x" }, false},
		} {
			r := resultSet{keys: slices.Clone(ref.keys), rows: slices.Clone(ref.rows)}
			c.f(&r)
			if msg := ds.verify(nq.Query, &r); (msg == "") != c.pass {
				t.Errorf("%s, %s: verify = %q, want pass %v", nq.Name, name, msg, c.pass)
			}
		}
	}
	// A row of a series the point query did not select.
	q := ds.Queries()[0].Query
	rs := resultSet{}
	rs.add(rs.series(ds.SeriesKey(0, 3)), q.Start, ds.Value(0, 3, 600))
	if msg := ds.verify(q, &rs); !strings.Contains(msg, "not selected") {
		t.Errorf("verify = %q", msg)
	}
}
