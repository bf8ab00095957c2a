package bench

import (
	"context"
	"slices"
	"testing"

	"github.com/stratadb/strata/engine"
)

// TestPrometheusAdapter writes in-order millisecond samples of two series
// and two fields, in two batches and across a reopen (the head is rebuilt
// from the WAL), and checks raw, filtered and mean answers; it also checks
// that what the TSDB cannot store is refused, not rounded or dropped.
func TestPrometheusAdapter(t *testing.T) {
	const ms = int64(1e6)
	mk := func(host string, ts int64, f1, f2 float64) engine.Point {
		return engine.Point{
			Measurement: "m",
			Tags:        []engine.Tag{{Key: "zone", Value: "z1"}, {Key: "host", Value: host}},
			Fields:      []engine.Field{{Key: "f1", Value: engine.Float(f1)}, {Key: "f2", Value: engine.Float(f2)}},
			Time:        ts,
		}
	}
	const a1, a2 = "m,host=a,zone=z1 f1", "m,host=a,zone=z1 f2"
	const b1, b2 = "m,host=b,zone=z1 f1", "m,host=b,zone=z1 f2"
	dir := t.TempDir()
	batches := [][][]engine.Point{
		{{mk("a", -3000*ms, 3, 30), mk("b", -1*ms, 2, 20)}, {mk("a", 0, 4, 40)}},
		{{mk("a", 5*ms, 6, 60), mk("b", 2000*ms, 5, 50)}},
	}
	for _, open := range batches {
		db, err := openPrometheus(dir, ConfigDefault, Fast)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range open {
			if err := db.write(b); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.close(); err != nil {
			t.Fatal(err)
		}
	}
	db, err := openPrometheus(dir, ConfigEqualMemory, Fast)
	if err != nil {
		t.Fatal(err)
	}
	defer db.close()
	cases := []struct {
		name string
		q    engine.Query
		want []sortedRow
	}{
		{"raw", engine.Query{Selector: engine.Selector{Measurement: "m", Start: -1e13, End: 1e13}}, []sortedRow{
			{a1, -3000 * ms, 3}, {a1, 0, 4}, {a1, 5 * ms, 6},
			{a2, -3000 * ms, 30}, {a2, 0, 40}, {a2, 5 * ms, 60},
			{b1, -1 * ms, 2}, {b1, 2000 * ms, 5},
			{b2, -1 * ms, 20}, {b2, 2000 * ms, 50},
		}},
		{"half-open", engine.Query{Selector: engine.Selector{Measurement: "m", Field: "f1", Start: -1 * ms, End: 5 * ms}}, []sortedRow{
			{a1, 0, 4}, {b1, -1 * ms, 2},
		}},
		{"sub-millisecond bounds", engine.Query{Selector: engine.Selector{Measurement: "m", Field: "f1", Start: -1*ms + 1, End: 5*ms + 1}}, []sortedRow{
			{a1, 0, 4}, {a1, 5 * ms, 6},
		}},
		{"series", engine.Query{Selector: engine.Selector{Measurement: "m", Field: "f2",
			Tags: []engine.Tag{{Key: "zone", Value: "z1"}, {Key: "host", Value: "a"}}, Start: 0, End: 6 * ms}}, []sortedRow{
			{a2, 0, 40}, {a2, 5 * ms, 60},
		}},
		{"mean", engine.Query{Selector: engine.Selector{Measurement: "m", Field: "f1", Start: -1e13, End: 1e13},
			Agg: engine.AggMean, Every: 2e9}, []sortedRow{
			{a1, -4e9, 3}, {a1, 0, 5}, {b1, -2e9, 2}, {b1, 2e9, 5},
		}},
		{"other measurement", engine.Query{Selector: engine.Selector{Measurement: "x", Start: -1e13, End: 1e13}}, nil},
		{"measurement prefix", engine.Query{Selector: engine.Selector{Measurement: "m_f", Start: -1e13, End: 1e13}}, nil},
	}
	for _, c := range cases {
		var rs resultSet
		if err := db.query(context.Background(), c.q, &rs); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := rs.sorted(); !slices.Equal(got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, got, c.want)
		}
	}
	for name, p := range map[string]engine.Point{
		"sub-millisecond": mk("a", 6*ms+1, 1, 1),
		"out of order":    mk("b", 0, 1, 1),
	} {
		if err := db.write([]engine.Point{p}); err == nil {
			t.Errorf("%s: write accepted", name)
		}
	}
	// The refused writes left nothing behind.
	var rs resultSet
	if err := db.query(context.Background(), cases[0].q, &rs); err != nil {
		t.Fatal(err)
	}
	if got := rs.sorted(); !slices.Equal(got, cases[0].want) {
		t.Errorf("after refused writes:\n got %v\nwant %v", got, cases[0].want)
	}
	// A refused batch's new series are forgotten with it: written again,
	// they are stored and found.
	if err := db.write([]engine.Point{mk("c", 10*ms, 7, 70), mk("c", 11*ms+1, 1, 1)}); err == nil {
		t.Error("a batch with a sub-millisecond time was accepted")
	}
	if err := db.write([]engine.Point{mk("c", 12*ms, 8, 80)}); err != nil {
		t.Fatal(err)
	}
	rs.reset()
	if err := db.query(context.Background(), engine.Query{Selector: engine.Selector{Measurement: "m",
		Tags: []engine.Tag{{Key: "host", Value: "c"}, {Key: "zone", Value: "z1"}}, Field: "f2", Start: 0, End: 1e13}}, &rs); err != nil {
		t.Fatal(err)
	}
	if got, want := rs.sorted(), []sortedRow{{"m,host=c,zone=z1 f2", 12 * ms, 80}}; !slices.Equal(got, want) {
		t.Errorf("after a refused batch: got %v, want %v", got, want)
	}
	if n, ok := db.(*promStore).compactions(); !ok || n != 0 {
		t.Errorf("compactions = %d, %v; want 0, true", n, ok)
	}
	if _, err := openPrometheus("/proc/none", ConfigDefault, Fast); err == nil {
		t.Error("open in an unusable directory succeeded")
	}
}
