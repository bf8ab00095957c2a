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
