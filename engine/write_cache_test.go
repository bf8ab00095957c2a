package engine

import (
	"slices"
	"testing"
)

// TestWriteReusedTagArray writes through one []Tag that the caller changes
// in place between writes, and through the same array under another
// measurement: the write path's cache of tag sets by array address must
// never put a point in the series of the array's earlier content.
func TestWriteReusedTagArray(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	tags := []Tag{{Key: "d", Value: "a"}, {Key: "s", Value: "x"}}
	write := func(m string, tm int64, v int64) {
		t.Helper()
		mustWrite(t, db, Point{Measurement: m, Tags: tags, Fields: []Field{{Key: "v", Value: Int(v)}}, Time: tm})
	}
	write("m", 1, 1)
	write("m", 2, 2) // a hit
	tags[0].Value = "b"
	write("m", 3, 3) // same address, another series
	write("n", 4, 4) // same address and tags, another measurement
	tags[1] = Tag{Key: "s", Value: "y"}
	write("m", 5, 5)
	tags[0].Value = "a"
	tags[1].Value = "x"
	write("m", 6, 6) // back to the first series
	want := map[string][]int64{
		"m,d=a,s=x v": {1, 2, 6},
		"m,d=b,s=x v": {3},
		"m,d=b,s=y v": {5},
		"n,d=b,s=x v": {4},
	}
	for _, m := range []string{"m", "n"} {
		for _, s := range mustQuery(t, db, Query{Selector: Selector{Measurement: m}}) {
			key := s.Key()
			var got []int64
			for _, smp := range s.Samples {
				if smp.Value.Int() != smp.Time {
					t.Fatalf("%s: sample %+v", key, smp)
				}
				got = append(got, smp.Time)
			}
			if w, ok := want[key]; !ok || len(got) != len(w) || !slices.Equal(got, w) {
				t.Fatalf("%s holds %v, want %v", key, got, w)
			}
			delete(want, key)
		}
	}
	if len(want) != 0 {
		t.Fatalf("series missing: %v", want)
	}
}
