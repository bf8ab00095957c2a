package bench

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
)

// TestStrataHTTPEscapes writes names that line protocol must escape and
// values that need every digit through the HTTP adapter, and reads them
// back from the database bit for bit.
func TestStrataHTTPEscapes(t *testing.T) {
	dir := t.TempDir()
	db, err := openStrataHTTP(dir, ConfigDefault, Durable)
	if err != nil {
		t.Fatal(err)
	}
	p := engine.Point{Measurement: "m x,y",
		Tags:   []engine.Tag{{Key: "a b", Value: "c,d=e f"}},
		Fields: []engine.Field{{Key: "f=1 x", Value: engine.Float(math.Pi)}, {Key: "g", Value: engine.Float(-1e-300)}},
		Time:   -5}
	line, err := appendLine(nil, &p)
	if err != nil || !strings.HasPrefix(string(line), `m\ x\,y,a\ b=c\,d\=e\ f f\=1\ x=`) {
		t.Fatalf("line %q, %v", line, err)
	}
	if err := db.write([]engine.Point{p}); err != nil {
		t.Fatal(err)
	}
	if err := db.write([]engine.Point{{Measurement: "m", Fields: []engine.Field{{Key: "s", Value: engine.String("x")}}}}); err == nil {
		t.Error("a string field was accepted: the adapters store floats")
	}
	var rs resultSet
	if err := db.query(context.Background(), engine.Query{Selector: engine.Selector{Measurement: "m x,y", Start: -10, End: 10}}, &rs); err != nil {
		t.Fatal(err)
	}
	got := rs.sorted()
	want := []sortedRow{
		{engine.SeriesKey("m x,y", p.Tags, "f=1 x"), -5, math.Pi},
		{engine.SeriesKey("m x,y", p.Tags, "g"), -5, -1e-300},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %v, want %v", got, want)
	}
	if err := db.close(); err != nil {
		t.Fatal(err)
	}
}

// TestStrataHTTPPipelined: batches posted with writeAsync are all stored
// once close (or a query) returns, and a request the server refuses fails
// a later call.
func TestStrataHTTPPipelined(t *testing.T) {
	db, err := openStrataHTTP(t.TempDir(), ConfigDefault, Fast)
	if err != nil {
		t.Fatal(err)
	}
	p := db.(pipeliner)
	batch := make([]engine.Point, 100)
	for k := range 10 {
		for i := range batch {
			batch[i] = engine.Point{Measurement: "m", Tags: []engine.Tag{{Key: "d", Value: strings.Repeat("x", i%7+1)}},
				Fields: []engine.Field{{Key: "v", Value: engine.Float(float64(k))}}, Time: int64(k*len(batch) + i)}
		}
		if err := p.writeAsync(batch); err != nil {
			t.Fatal(err)
		}
	}
	var rs resultSet
	if err := db.query(context.Background(), engine.Query{Selector: engine.Selector{Measurement: "m", Start: 0, End: 1 << 40}}, &rs); err != nil {
		t.Fatal(err)
	}
	if n := len(rs.sorted()); n != 1000 {
		t.Fatalf("%d points stored, want 1000", n)
	}
	bad := []engine.Point{{Measurement: "m", Tags: []engine.Tag{{Key: "d", Value: "x"}}, Fields: []engine.Field{{Key: "v", Value: engine.Float(math.NaN())}}, Time: 1}}
	if err := p.writeAsync(bad); err != nil {
		t.Fatal(err)
	}
	if err := db.close(); err == nil {
		t.Fatal("close: a refused request went unreported")
	}
}
