package bench

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
)

// seriesModel is what a store must answer: the last value written at each
// time of each series, by canonical key.
type seriesModel map[string]map[int64]float64

func (m seriesModel) write(points []engine.Point) {
	for _, p := range points {
		for _, f := range p.Fields {
			key := engine.SeriesKey(p.Measurement, p.Tags, f.Key)
			if m[key] == nil {
				m[key] = map[int64]float64{}
			}
			m[key][p.Time] = f.Value.Float()
		}
	}
}

// answer is q's answer from the model, sorted by series key and time.
func (m seriesModel) answer(t *testing.T, q engine.Query) []sortedRow {
	t.Helper()
	var out []sortedRow
	for key, samples := range m {
		meas, tags, field, err := engine.ParseSeriesKey(key)
		if err != nil {
			t.Fatal(err)
		}
		s := seriesInfo{key: key, measurement: meas, tags: tags, field: field}
		if !s.matches(&q.Selector) {
			continue
		}
		var times []int64
		for ts := range samples {
			if ts >= q.Start && ts < q.End {
				times = append(times, ts)
			}
		}
		slices.Sort(times)
		var m meanAcc
		for _, ts := range times {
			v := samples[ts]
			if q.Agg == engine.AggNone {
				out = append(out, sortedRow{key, ts, v})
				continue
			}
			if b := bucket(ts, q.Every, q.Start); b != m.bucket || m.n == 0 {
				if m.n > 0 {
					out = append(out, sortedRow{key, m.bucket, m.sum / float64(m.n)})
				}
				m = meanAcc{bucket: b}
			}
			m.sum += v
			m.n++
		}
		if m.n > 0 {
			out = append(out, sortedRow{key, m.bucket, m.sum / float64(m.n)})
		}
	}
	slices.SortFunc(out, func(a, b sortedRow) int {
		return cmp.Or(strings.Compare(a.key, b.key), cmp.Compare(a.t, b.t))
	})
	return out
}

// TestSeriesIndexStoresModel writes random batches into every store that
// finds its series through the seriesIndex (the floor, LevelDB, Pebble)
// and compares its answers with a model, across reopens. The points
// exercise what the index takes shortcuts on: tag slices shared between
// points, fresh copies of them, unsorted copies, one slice rewritten in
// place between batches with another tag set (same address, other
// series), fields in any order and more of them than a set scans, tag
// values that need escaping in a canonical key, out-of-order and
// overwritten times.
func TestSeriesIndexStoresModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(904, 13))
	values := []string{"a", "b", "a b", "x,y", "k=v", `q\`, "é"}
	var sets [][]engine.Tag
	for range 40 {
		var tags []engine.Tag
		for _, k := range []string{"host", "rack", "site", "zone"} {
			if rng.IntN(2) == 0 {
				tags = append(tags, engine.Tag{Key: k, Value: values[rng.IntN(len(values))]})
			}
		}
		sets = append(sets, tags)
	}
	// Measurement u has the same tag keys in every series: its selectors
	// naming them all are answered by lookup.
	var uniform [][]engine.Tag
	for i := range 12 {
		uniform = append(uniform, []engine.Tag{{Key: "host", Value: values[i%len(values)]}, {Key: "site", Value: strconv.Itoa(i % 3)}})
	}
	fieldNames := make([]string, 12)
	for i := range fieldNames {
		fieldNames[i] = "f" + strconv.Itoa(i)
	}
	reused := make([]engine.Tag, 0, 4) // rewritten in place between batches
	var batches [][]engine.Point
	var reusedSet []int // the tag set reused holds while batch k is written
	for range 60 {
		k := rng.IntN(len(sets))
		reusedSet = append(reusedSet, k)
		reused = append(reused[:0], sets[k]...)
		points := make([]engine.Point, 1+rng.IntN(60))
		for i := range points {
			p := &points[i]
			p.Measurement = []string{"m", "n", "u"}[rng.IntN(3)]
			tags, share := sets[rng.IntN(len(sets))], 4
			if p.Measurement == "u" {
				tags, share = uniform[rng.IntN(len(uniform))], 3
			}
			switch rng.IntN(share) {
			case 0:
				p.Tags = tags
			case 1:
				p.Tags = slices.Clone(tags)
			case 2:
				p.Tags = slices.Clone(tags)
				rng.Shuffle(len(p.Tags), func(i, j int) { p.Tags[i], p.Tags[j] = p.Tags[j], p.Tags[i] })
			case 3:
				p.Tags = reused
			}
			nf := 1 + rng.IntN(3)
			if rng.IntN(8) == 0 {
				nf = len(fieldNames) // a set of more than manyFields fields
			}
			for _, j := range rng.Perm(len(fieldNames))[:nf] {
				p.Fields = append(p.Fields, engine.Field{Key: fieldNames[j], Value: engine.Float(float64(rng.IntN(1000)) / 8)})
			}
			p.Time = int64(rng.IntN(200)-50) * 1e9
		}
		batches = append(batches, points)
	}
	for _, name := range []string{EngineMemLimit, EngineLevelDB, EnginePebble} {
		t.Run(name, func(t *testing.T) {
			open, err := lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			defer forgetMem(dir)
			model := seriesModel{}
			db, err := open(dir, ConfigDefault, Fast)
			if err != nil {
				t.Fatal(err)
			}
			for k, b := range batches {
				reused = append(reused[:0], sets[reusedSet[k]]...) // in place: cap 4
				if err := db.write(b); err != nil {
					t.Fatal(err)
				}
				model.write(b)
				if k%20 == 19 {
					if err := db.close(); err != nil {
						t.Fatal(err)
					}
					if db, err = open(dir, ConfigDefault, Fast); err != nil {
						t.Fatal(err)
					}
				}
			}
			defer db.close()
			queries := []engine.Query{
				{Selector: engine.Selector{Measurement: "m", Start: -1e12, End: 1e12}},
				{Selector: engine.Selector{Measurement: "n", Field: "f3", Start: -10e9, End: 90e9}},
				{Selector: engine.Selector{Measurement: "m", Field: "f11", Start: -1e12, End: 1e12}, Agg: engine.AggMean, Every: 30e9},
				{Selector: engine.Selector{Measurement: "n", Start: 0, End: 1e12}, Agg: engine.AggMean},
				{Selector: engine.Selector{Measurement: "x", Start: -1e12, End: 1e12}},
			}
			for _, tags := range sets[:10] {
				if len(tags) > 0 { // a subset or all of the tags of some series of m
					shuffled := slices.Clone(tags)
					slices.Reverse(shuffled)
					queries = append(queries, engine.Query{Selector: engine.Selector{Measurement: "m", Field: "f0", Tags: shuffled, Start: -1e12, End: 1e12}})
				}
			}
			for _, tags := range uniform {
				queries = append(queries,
					engine.Query{Selector: engine.Selector{Measurement: "u", Field: "f1", Tags: []engine.Tag{tags[1], tags[0]}, Start: -1e12, End: 1e12}},
					engine.Query{Selector: engine.Selector{Measurement: "u", Field: "f2", Tags: tags[1:], Start: -1e12, End: 1e12}})
			}
			queries = append(queries, engine.Query{Selector: engine.Selector{Measurement: "u", Field: "f1",
				Tags: []engine.Tag{{Key: "host", Value: "none"}, {Key: "site", Value: "0"}}, Start: -1e12, End: 1e12}})
			for _, q := range queries {
				var rs resultSet
				if err := db.query(context.Background(), q, &rs); err != nil {
					t.Fatalf("%+v: %v", q, err)
				}
				if got, want := rs.sorted(), model.answer(t, q); !slices.Equal(got, want) {
					t.Errorf("%+v:\n got %d rows %v\nwant %d rows %v", q.Selector, len(got), got, len(want), want)
				}
			}
		})
	}
}

// TestSeriesIndexRollback checks that the series of a failed batch are
// forgotten: the next batch numbers them again from where the last good
// batch ended, and a key-value store's dictionary reloads in order.
func TestSeriesIndexRollback(t *testing.T) {
	pt := func(host, field string, v engine.Value) engine.Point {
		return engine.Point{Measurement: "m", Tags: []engine.Tag{{Key: "host", Value: host}},
			Fields: []engine.Field{{Key: field, Value: v}}, Time: 1}
	}
	for _, name := range []string{EngineLevelDB, EnginePebble} {
		t.Run(name, func(t *testing.T) {
			open, err := lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			db, err := open(dir, ConfigDefault, Fast)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.write([]engine.Point{pt("a", "f", engine.Float(1))}); err != nil {
				t.Fatal(err)
			}
			// New series b/f and a/g, then a value the store refuses.
			bad := []engine.Point{pt("b", "f", engine.Float(2)), pt("a", "g", engine.Float(3)), pt("c", "f", engine.Int(4))}
			if err := db.write(bad); err == nil {
				t.Fatal("an int field was stored")
			}
			if err := db.write([]engine.Point{pt("a", "g", engine.Float(5)), pt("b", "f", engine.Float(6))}); err != nil {
				t.Fatal(err)
			}
			if err := db.close(); err != nil {
				t.Fatal(err)
			}
			if db, err = open(dir, ConfigDefault, Fast); err != nil {
				t.Fatal(err)
			}
			defer db.close()
			var rs resultSet
			if err := db.query(context.Background(), engine.Query{Selector: engine.Selector{Measurement: "m", Start: 0, End: 2}}, &rs); err != nil {
				t.Fatal(err)
			}
			want := []sortedRow{{"m,host=a f", 1, 1}, {"m,host=a g", 1, 5}, {"m,host=b f", 1, 6}}
			if got := rs.sorted(); !slices.Equal(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
			var dict *kvDict
			switch s := db.(type) {
			case *leveldbStore:
				dict = s.dict
			case *pebbleStore:
				dict = s.dict
			}
			var keys []string
			for i, s := range dict.idx.series {
				if s.id != uint64(i)+1 {
					t.Errorf("series %d has id %d", i, s.id)
				}
				keys = append(keys, s.key)
			}
			if want := []string{"m,host=a f", "m,host=a g", "m,host=b f"}; !slices.Equal(keys, want) {
				t.Errorf("series after reopen %q, want %q", keys, want)
			}
		})
	}
}

// TestSeriesIndexAllocs checks that finding the series of a known point
// allocates nothing, whether its tag slice is one the index has seen (the
// cache), a fresh copy (the identity key) or an unsorted copy.
func TestSeriesIndexAllocs(t *testing.T) {
	tags := []engine.Tag{{Key: "device_id", Value: "dev-0042"}, {Key: "site", Value: "site-02"}}
	p := engine.Point{Measurement: "sensor", Tags: tags, Fields: []engine.Field{
		{Key: "temperature", Value: engine.Float(1)}, {Key: "humidity", Value: engine.Float(2)}}}
	var x seriesIndex
	set := x.set(&p)
	want := [2]uint64{}
	for f := range p.Fields {
		want[f], _ = x.field(set, &p, f)
	}
	copied := p
	copied.Tags = slices.Clone(tags)
	unsorted := p
	unsorted.Tags = []engine.Tag{tags[1], tags[0]}
	swapped := p
	swapped.Fields = []engine.Field{p.Fields[1], p.Fields[0]}
	for _, c := range []struct {
		name string
		p    *engine.Point
	}{{"shared", &p}, {"copied", &copied}, {"unsorted", &unsorted}, {"fields swapped", &swapped}} {
		allocs := testing.AllocsPerRun(100, func() {
			s := x.set(c.p)
			for f := range c.p.Fields {
				id, added := x.field(s, c.p, f)
				if added || id != want[slices.IndexFunc(p.Fields, func(pf engine.Field) bool { return pf.Key == c.p.Fields[f].Key })] {
					t.Fatalf("%s: field %d: id %d, added %v", c.name, f, id, added)
				}
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per point", c.name, allocs)
		}
	}
}
