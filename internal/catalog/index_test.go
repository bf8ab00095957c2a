package catalog

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/point"
)

// TestSortByKey checks the key ranks against sorting key strings: for
// large and small subsets, and for series added after the ranks were built.
func TestSortByKey(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	c := New()
	add := func(n int) {
		for range n {
			dev := fmt.Sprintf("d%d", r.IntN(1_000_000))
			key := point.SeriesKey("m", []point.Tag{{Key: "dev", Value: dev}}, "f")
			if _, ok := c.Lookup(key); ok {
				continue
			}
			if _, err := c.AddKey([]byte(key), point.KindFloat); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(what string) {
		t.Helper()
		for _, frac := range []int{1, 2, 20, 1000} {
			var ids []uint64
			for id := range uint64(c.series.n) {
				if r.IntN(frac) == 0 {
					ids = append(ids, id)
				}
			}
			want := slices.Clone(ids)
			slices.SortFunc(want, func(a, b uint64) int { return strings.Compare(c.series.at(a).Key, c.series.at(b).Key) })
			c.SortByKey(ids)
			if !slices.Equal(ids, want) {
				t.Fatalf("%s, 1/%d of the series: order differs", what, frac)
			}
		}
	}
	add(3000)
	check("fresh catalog")
	add(200) // fewer than a rebuild needs: placed by key
	check("after a few additions")
	add(5000) // a rebuild
	check("after many additions")
}

// Values whose hashes collide share a map entry and are told apart by
// value: each is found, and a value of that hash not added is not.
func TestPostingHashCollision(t *testing.T) {
	ki := &keyIndex{postings: make(map[uint64]*posting)}
	const h = 42
	a := &posting{value: "a", ids: []uint64{1}}
	b := &posting{value: "b", ids: []uint64{2}}
	ki.insert(h, a)
	ki.insert(h, b)
	ki.insert(valueHash("c"), &posting{value: "c", ids: []uint64{3}})
	for _, want := range []*posting{a, b} {
		if got := ki.postingOf(h, want.value); got != want {
			t.Fatalf("postingOf(%d, %q) = %v, want %v", h, want.value, got, want)
		}
	}
	if got := ki.postingOf(h, "c"); got != nil {
		t.Fatalf("postingOf(%d, \"c\") = %v, want nil: c has another hash", h, got)
	}
	if got := ki.posting("c"); got == nil || got.ids[0] != 3 {
		t.Fatalf("posting(\"c\") = %v", got)
	}
	if got := ki.posting("d"); got != nil {
		t.Fatalf("posting(\"d\") = %v, want nil", got)
	}
}
