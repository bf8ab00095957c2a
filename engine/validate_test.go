package engine

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestWriteInvalid checks every invalid-point case of docs/design.md: the error
// wraps ErrInvalid, is a *PointError with the bad point's index, names the
// bad part, and nothing of the call is stored, not even the valid points
// before the bad one.
func TestWriteInvalid(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	host := []Tag{{Key: "host", Value: "a"}}
	ok := func(tm int64) Point { return pt("m", host, "v", Float(1), tm) }
	fv := func(k string, v Value) []Field { return []Field{{Key: k, Value: v}} }

	cases := []struct {
		name string
		bad  Point
		hint string // a piece of the error message naming the bad part
	}{
		{"empty measurement", Point{Tags: host, Fields: fv("v", Float(1))}, "measurement"},
		{"no fields", Point{Measurement: "m", Tags: host}, "field"},
		{"empty fields slice", Point{Measurement: "m", Fields: []Field{}}, "field"},
		{"NaN", Point{Measurement: "m", Fields: fv("nan", Float(math.NaN()))}, "nan"},
		{"+Inf", Point{Measurement: "m", Fields: fv("pinf", Float(math.Inf(1)))}, "pinf"},
		{"-Inf", Point{Measurement: "m", Fields: fv("ninf", Float(math.Inf(-1)))}, "ninf"},
		{"empty tag key", Point{Measurement: "m", Tags: []Tag{{Key: "", Value: "x"}}, Fields: fv("v", Float(1))}, "tag"},
		{"duplicate tag key", Point{Measurement: "m", Tags: []Tag{{Key: "dup", Value: "x"}, {Key: "dup", Value: "y"}}, Fields: fv("v", Float(1))}, "dup"},
		{"empty tag value", Point{Measurement: "m", Tags: []Tag{{Key: "emptyval", Value: ""}}, Fields: fv("v", Float(1))}, "emptyval"},
		{"empty field key", Point{Measurement: "m", Fields: fv("", Float(1))}, "field"},
		{"duplicate field key", Point{Measurement: "m", Fields: []Field{{Key: "twice", Value: Float(1)}, {Key: "twice", Value: Float(2)}}}, "twice"},
		{"newline in measurement", Point{Measurement: "m\nx", Fields: fv("v", Float(1))}, "measurement"},
		{"newline in tag key", Point{Measurement: "m", Tags: []Tag{{Key: "k\nk", Value: "x"}}, Fields: fv("v", Float(1))}, "tag"},
		{"newline in tag value", Point{Measurement: "m", Tags: []Tag{{Key: "nlval", Value: "x\ny"}}, Fields: fv("v", Float(1))}, "nlval"},
		{"newline in field key", Point{Measurement: "m", Fields: fv("f\nf", Float(1))}, "field"},
		{"zero Value", Point{Measurement: "m", Fields: []Field{{Key: "zero"}}}, "zero"},
		{"zero Value after a good field", Point{Measurement: "m", Fields: []Field{{Key: "good", Value: Int(1)}, {Key: "zero2"}}}, "zero2"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Two valid points of new and existing series come first.
			pts := []Point{ok(int64(1000 + i)), pt("fresh", nil, "v", Int(7), int64(i)), c.bad, ok(int64(2000 + i))}
			err := db.Write(pts)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Write returned %v, want ErrInvalid", err)
			}
			var pe *PointError
			if !errors.As(err, &pe) || pe.Index != 2 {
				t.Fatalf("Write returned %v (%T), want a *PointError with Index 2", err, err)
			}
			if !strings.Contains(strings.ToLower(err.Error()), c.hint) {
				t.Errorf("error %q does not name the bad part (%q)", err, c.hint)
			}
		})
	}
	// Nothing of any rejected call was stored.
	if res := mustQuery(t, db, rawAll("m")); len(res) != 0 {
		t.Fatalf("rejected writes stored data: %s", formatSeries(res))
	}
	if res := mustQuery(t, db, rawAll("fresh")); len(res) != 0 {
		t.Fatalf("rejected writes stored data: %s", formatSeries(res))
	}
	// Nor did they fix a kind: "fresh v" takes a string now.
	mustWrite(t, db, pt("fresh", nil, "v", String("s"), 1))
	if st := db.Stats(); st.PointsWritten != 1 {
		t.Errorf("PointsWritten = %d after one accepted point", st.PointsWritten)
	}
	if err := db.Write(nil); err != nil {
		t.Errorf("Write(nil) = %v", err)
	}
}

// TestQueryDeleteInvalid checks the invalid selector and query cases.
func TestQueryDeleteInvalid(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	mustWrite(t, db, pt("m", nil, "v", Float(1), 5))
	ctx := context.Background()
	sel := Selector{Measurement: "m", Start: 0, End: 10}
	queries := []struct {
		name string
		q    Query
		hint string
	}{
		{"empty measurement", Query{Selector: Selector{Start: 0, End: 10}}, "measurement"},
		{"start equals end", Query{Selector: Selector{Measurement: "m", Start: 10, End: 10}}, "10"},
		{"start after end", Query{Selector: Selector{Measurement: "m", Start: 11, End: 10}}, "11"},
		{"negative every", Query{Selector: sel, Agg: AggMean, Every: -5}, "-5"},
		{"unknown agg", Query{Selector: sel, Agg: AggLast + 1}, "aggregate"},
		{"negative agg", Query{Selector: sel, Agg: -1}, "aggregate"},
		{"empty tag key in selector", Query{Selector: Selector{Measurement: "m", Tags: []Tag{{Value: "x"}}, End: 10}}, "tag"},
	}
	for _, c := range queries {
		t.Run("query/"+c.name, func(t *testing.T) {
			res, err := db.Query(ctx, c.q)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Query returned %v, %v; want ErrInvalid", res, err)
			}
			if !strings.Contains(strings.ToLower(err.Error()), c.hint) {
				t.Errorf("error %q does not name the bad part (%q)", err, c.hint)
			}
		})
	}
	deletes := []struct {
		name string
		s    Selector
		hint string
	}{
		{"empty measurement", Selector{Start: 0, End: 10}, "measurement"},
		{"start equals end", Selector{Measurement: "m", Start: 3, End: 3}, "3"},
		{"start after end", Selector{Measurement: "m", Start: 9, End: 3}, "9"},
	}
	for _, c := range deletes {
		t.Run("delete/"+c.name, func(t *testing.T) {
			err := db.Delete(ctx, c.s)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Delete returned %v, want ErrInvalid", err)
			}
			if !strings.Contains(strings.ToLower(err.Error()), c.hint) {
				t.Errorf("error %q does not name the bad part (%q)", err, c.hint)
			}
		})
	}
	// The rejected deletes deleted nothing.
	if got := samplesOf(t, mustQuery(t, db, rawAll("m"))); len(got) != 1 {
		t.Fatalf("samples after rejected deletes: %v", got)
	}
}

// TestWriteKindConflictAtomic checks that a kind conflict, inside one call
// or against stored data, rejects the whole call and fixes no kind for the
// call's new series.
func TestWriteKindConflictAtomic(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	ab := []Tag{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}}
	ba := []Tag{{Key: "b", Value: "2"}, {Key: "a", Value: "1"}} // same tag set, other order

	// Inside one call: the same series (tags in another order) as float and int.
	err := db.Write([]Point{
		pt("new", nil, "x", Bool(true), 1),
		pt("k", ab, "f", Float(1.5), 1),
		pt("k", ba, "f", Int(2), 2),
	})
	var pe *PointError
	if !errors.Is(err, ErrFieldTypeConflict) || !errors.As(err, &pe) || pe.Index != 2 {
		t.Fatalf("in-call conflict: Write returned %v, want ErrFieldTypeConflict at index 2", err)
	}
	for _, m := range []string{"new", "k"} {
		if res := mustQuery(t, db, rawAll(m)); len(res) != 0 {
			t.Fatalf("rejected call stored %s: %s", m, formatSeries(res))
		}
	}
	// No kind was fixed: int for "k f" and string for "new x" are accepted now.
	mustWrite(t, db, pt("k", ba, "f", Int(3), 3), pt("new", nil, "x", String("s"), 1))

	// Against stored data: a new series first, then a conflicting one.
	err = db.Write([]Point{
		pt("other", nil, "y", Uint(1), 10),
		{Measurement: "k", Tags: ab, Fields: []Field{{Key: "g", Value: Float(1)}, {Key: "f", Value: Float(4)}}, Time: 11},
	})
	if !errors.Is(err, ErrFieldTypeConflict) || !errors.As(err, &pe) || pe.Index != 1 {
		t.Fatalf("stored conflict: Write returned %v, want ErrFieldTypeConflict at index 1", err)
	}
	if res := mustQuery(t, db, rawAll("other")); len(res) != 0 {
		t.Fatalf("rejected call stored other: %s", formatSeries(res))
	}
	if res := mustQuery(t, db, Query{Selector: Selector{Measurement: "k", Field: "g", Start: minTime, End: maxTime}}); len(res) != 0 {
		t.Fatalf("rejected call stored k g: %s", formatSeries(res))
	}
	mustWrite(t, db, pt("other", nil, "y", Bool(false), 10), pt("k", ab, "g", String("str"), 11))
	got := samplesOf(t, mustQuery(t, db, Query{Selector: Selector{Measurement: "k", Field: "f", Start: minTime, End: maxTime}}))
	if len(got) != 1 || got[0].Time != 3 || !got[0].Value.Equal(Int(3)) {
		t.Fatalf("k f = %v, want [3=3]", got)
	}
}
