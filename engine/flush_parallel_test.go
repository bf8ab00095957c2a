package engine

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"testing"
)

// TestFlushEncodeParallelAndSerial flushes the same points twice, once as
// a flush someone waits for with enough series to be encoded on every
// core, once on the flush's goroutine, and checks that both segments
// answer the same, before and after a reopen.
func TestFlushEncodeParallelAndSerial(t *testing.T) {
	var pts []Point
	for s := range parallelFlushSeries + 100 {
		for i := range int64(3) {
			pts = append(pts, pt("m", []Tag{{Key: "s", Value: fmt.Sprint(s)}}, "v", Int(int64(s)*10+i), 1000+i*7))
		}
	}
	pts = append(pts, pt("m", []Tag{{Key: "s", Value: "long"}}, "v", Float(1.5), 1))
	query := func(db *DB) []Series {
		t.Helper()
		res, err := db.Query(context.Background(), Query{Selector: Selector{Measurement: "m"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	dirA, dirB := t.TempDir(), t.TempDir()
	a := openDB(t, dirA, opts) // Flush waits: parallel
	if err := a.Write(pts); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	b := openDB(t, dirB, opts)
	b.parallelFlushMin = math.MaxInt // every flush on one goroutine
	if err := b.Write(pts); err != nil {
		t.Fatal(err)
	}
	if b.flushAwaited() {
		t.Fatal("an idle database reports a flush awaited")
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	want := query(b)
	if got := query(a); len(want) != parallelFlushSeries+101 || !reflect.DeepEqual(got, want) {
		t.Fatalf("parallel and serial flushes answer differently (%d and %d series)", len(got), len(want))
	}
	for _, d := range []*DB{a, b} {
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	a, b = openDB(t, dirA, opts), openDB(t, dirB, opts)
	if got := query(a); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(query(b), want) {
		t.Fatal("reopened flushes answer differently")
	}
}
