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
