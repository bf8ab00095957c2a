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

// Values whose hashes collide share a probe and are told apart by value:
// each is found, and a value of that hash not added is not.
func TestPostingHashCollision(t *testing.T) {
	x := newIndex()
	ki := &keyIndex{x: &x}
	const h uint64 = 42 << 40 // a tag of 42, slot 0
	add := func(h uint64, v string, id uint64) *posting {
		p, r := x.newPosting(v, id)
		ki.postings.insert(h, r)
		return p
	}
	a := add(h, "a", 1)
	b := add(h, "b", 2)
	add(valueHash("c"), "c", 3)
	for _, want := range []*posting{a, b} {
		if got := ki.postingOf(h, want.value); got != want {
			t.Fatalf("postingOf(%d, %q) = %v, want %v", h, want.value, got, want)
		}
	}
	if got := ki.postingOf(h, "c"); got != nil {
		t.Fatalf("postingOf(%d, \"c\") = %v, want nil: c has another hash", h, got)
	}
	if got := ki.posting("c"); got == nil || got.ids()[0] != 3 {
		t.Fatalf("posting(\"c\") = %v", got)
	}
}

// TestSortByKeyFresh checks the order of series added after the ranks
// were built (a flush in a burst of new series): keys sharing long
// prefixes, keys that are prefixes of others, ties in their first bytes
// after the shared prefix, mixed with ranked series.
func TestSortByKeyFresh(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	values := []func() string{
		func() string { return fmt.Sprintf("dev-%07d", r.IntN(10_000_000)) },
		func() string { return fmt.Sprintf("dev-%d", r.IntN(100)) },
		func() string { return "dev-" + strings.Repeat("0", r.IntN(20)) },
		func() string { return fmt.Sprintf("dev-00000000%c%d", 'a'+r.IntN(3), r.IntN(1000)) },
		func() string { return string(rune('a' + r.IntN(26))) },
	}
	for _, ranked := range []int{0, 1, 500} {
		c := New()
		add := func(n int) {
			for range n {
				tags := []point.Tag{{Key: "device_id", Value: values[r.IntN(len(values))]()}}
				key := point.SeriesKey("sensor", tags, []string{"value", "v", "value2"}[r.IntN(3)])
				if _, ok := c.Lookup(key); ok {
					continue
				}
				if _, err := c.AddKey([]byte(key), point.KindFloat); err != nil {
					t.Fatal(err)
				}
			}
		}
		add(ranked)
		if c.series.n >= 2 {
			c.SortByKey([]uint64{0, 1}) // builds the ranks of the first series
		}
		add(6000)
		for _, frac := range []int{1, 3} {
			var ids []uint64
			for id := range uint64(c.series.n) {
				if r.IntN(frac) == 0 {
					ids = append(ids, id)
				}
			}
			r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			want := slices.Clone(ids)
			slices.SortFunc(want, func(a, b uint64) int { return strings.Compare(c.series.at(a).Key, c.series.at(b).Key) })
			c.SortByKeyRanks(ids, false)
			if !slices.Equal(ids, want) {
				t.Fatalf("%d ranked, 1/%d of the series: order differs", ranked, frac)
			}
		}
	}
}

// BenchmarkSortFresh sorts the ids of 400,000 series added after the
// ranks were built, as a flush in a burst of new series does: one field
// per device, and four (whose keys tie in their first bytes after the
// shared prefix).
func BenchmarkSortFresh(b *testing.B) {
	const series = 400_000
	for _, fields := range []int{1, 4} {
		b.Run(fmt.Sprintf("fields=%d", fields), func(b *testing.B) {
			c := New()
			c.AddAll(series, func(i int) (string, point.Kind) {
				dev := (i / fields * 7919) % (series / fields)
				return fmt.Sprintf("sensor,device_id=dev-%07d,region=r%d value%d", dev, dev%16, i%fields), point.KindFloat
			})
			ids := make([]uint64, series)
			r := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			for b.Loop() {
				for i := range ids {
					ids[i] = uint64(i)
				}
				r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
				c.SortByKeyRanks(ids, false)
			}
		})
	}
}

// TestSortAbbrevPrefixes sorts keys that are prefixes of one another
// followed by zero bytes, and keys that share prefixes of every length:
// runs that tie on their abbreviation at several depths, and a run
// whose keys share no longer prefix.
func TestSortAbbrevPrefixes(t *testing.T) {
	c := New()
	var vals []string
	for i := range 40 {
		vals = append(vals, "v"+strings.Repeat("\x00", i), "v"+strings.Repeat("x", i), fmt.Sprintf("v%0*d", i%12+1, i))
	}
	keys := make([]string, 0, len(vals)+40)
	for _, v := range vals {
		keys = append(keys, point.SeriesKey("m", []point.Tag{{Key: "k", Value: v}}, "f"))
	}
	for i := range 40 { // keys that are the first one and zero bytes
		keys = append(keys, point.SeriesKey("m", []point.Tag{{Key: "k", Value: "v"}}, "f"+strings.Repeat("\x00", i)))
	}
	for _, key := range keys {
		if _, ok := c.Lookup(key); ok {
			continue
		}
		if _, err := c.AddKey([]byte(key), point.KindFloat); err != nil {
			t.Fatalf("AddKey(%q): %v", key, err)
		}
	}
	r := rand.New(rand.NewPCG(9, 10))
	for range 20 {
		ids := make([]uint64, c.series.n)
		for i := range ids {
			ids[i] = uint64(i)
		}
		r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		want := slices.Clone(ids)
		slices.SortFunc(want, func(a, b uint64) int { return strings.Compare(c.series.at(a).Key, c.series.at(b).Key) })
		c.mu.RLock()
		c.sortAbbrev(ids, -1)
		c.mu.RUnlock()
		if !slices.Equal(ids, want) {
			t.Fatalf("order differs:\n got %q\nwant %q", c.Keys(ids), c.Keys(want))
		}
	}
}
