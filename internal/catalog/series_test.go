package catalog

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stratadb/strata/internal/point"
)

// TestMetaPointersStable checks that the pointer Meta returns for a series
// is the very object the catalog returns for it after many more series
// were added, across several chunks, and that its fields are unchanged.
func TestMetaPointersStable(t *testing.T) {
	c := New()
	const n = 5*chunkLen + 17
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("m,host=h%d,dc=d%d f%d", i/3, i%5, i%3)
	}
	held := make([]*Series, 0, n)
	for i, k := range keys {
		c.AddAll(1, func(int) (string, point.Kind) { return k, point.KindFloat })
		s, ok := c.Meta(uint64(i))
		if !ok || s.Key != k {
			t.Fatalf("Meta(%d) = %v, %v right after adding %q", i, s, ok, k)
		}
		held = append(held, s)
	}
	if _, ok := c.Meta(n); ok {
		t.Fatalf("Meta(%d) found a series past the last", n)
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i)
	}
	metas := c.Metas(ids)
	for i, k := range keys {
		s, ok := c.Meta(uint64(i))
		if !ok || s != held[i] || metas[i] != held[i] {
			t.Fatalf("series %d: Meta %p, Metas %p, first returned %p: not the same object", i, s, metas[i], held[i])
		}
		if held[i].Key != k || held[i].Field != fmt.Sprintf("f%d", i%3) || held[i].Set.Measurement() != "m" {
			t.Fatalf("series %d changed: %+v, want key %q", i, *held[i], k)
		}
		if id, ok := c.Lookup(k); !ok || id != uint64(i) {
			t.Fatalf("Lookup(%q) = %d, %v; want %d", k, id, ok, i)
		}
	}
}

// TestSince checks that Since yields exactly the series added from an id
// on, in order and once each, from every kind of start (0, inside a chunk,
// a chunk boundary, the end, past it), that it yields what the catalog
// held when called and no series added after, and that a loop may stop
// early.
func TestSince(t *testing.T) {
	c := New()
	const n = 3*chunkLen + 5
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("cpu,host=h%05d usage", i)
	}
	c.AddAll(n, func(i int) (string, point.Kind) { return keys[i], point.KindFloat })
	for _, from := range []int{-1, 0, 1, chunkLen - 1, chunkLen, chunkLen + 1, 2*chunkLen + 3, n - 1, n, n + 10} {
		held := c.Len()
		seq := c.Since(from)
		late := fmt.Sprintf("cpu,host=late%d usage", from)
		c.AddAll(1, func(int) (string, point.Kind) { return late, point.KindFloat })
		want := max(from, 0)
		for id, s := range seq {
			if id != uint64(want) || want >= held || s.Key != keys[want] {
				t.Fatalf("Since(%d): got %d %q, want id %d of %d", from, id, s.Key, want, held)
			}
			if m, _ := c.Meta(id); m != s {
				t.Fatalf("Since(%d): series %d is not the object Meta returns", from, id)
			}
			want++
		}
		if want < held {
			t.Fatalf("Since(%d) stopped at %d, want %d", from, want, held)
		}
		keys = append(keys, late)
		if c.Len() != len(keys) {
			t.Fatalf("%d series, want %d", c.Len(), len(keys))
		}
		// A later call sees the series added since.
		var got []string
		for _, s := range c.Since(n) {
			got = append(got, s.Key)
		}
		if !slices.Equal(got, keys[n:]) {
			t.Fatalf("Since(%d) = %q, want %q", n, got, keys[n:])
		}
	}
	stopped := 0
	for id := range c.Since(chunkLen - 2) {
		stopped++
		if id == chunkLen {
			break
		}
	}
	if stopped != 3 {
		t.Fatalf("loop broken at id %d ran %d times, want 3", chunkLen, stopped)
	}
}

// TestCompactLayout checks the sizes the catalog's memory figures rest on,
// on 64-bit platforms (where they were measured): a Series keeps its set
// chain in padding, and a Set of one field holds no slice or map of its
// own, its measurement and tags only in its key, and neither a set nor a
// posting chains to another of the same hash.
func TestCompactLayout(t *testing.T) {
	if word := unsafe.Sizeof(uintptr(0)); word == 8 {
		unchained := unsafe.Sizeof(struct {
			Key   string
			Kind  point.Kind
			Set   *Set
			Field string
		}{})
		if got := unsafe.Sizeof(Series{}); got != unchained {
			t.Errorf("Series is %d bytes, %d without its set chain", got, unchained)
		}
		if got := unsafe.Sizeof(Set{}); got != 32 {
			t.Errorf("Set is %d bytes, want 32", got)
		}
		if got := unsafe.Sizeof(posting{}); got != 32 {
			t.Errorf("posting is %d bytes, want 32", got)
		}
	}
}

// TestValuesMerge adds the values of a key in rounds, between which a
// reader merges the fresh ones into the sorted list, and checks that the
// sorted list is every value once, in order, and that a list a reader got
// earlier is never modified.
func TestValuesMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	c := New()
	var all []string
	seen := map[string]bool{}
	type held struct {
		vals []*posting
		want []string
	}
	var earlier []held
	for round, size := range []int{0, 1, 3, postingChunkMin + 1, 100, 5000, 2, 9000} {
		for range size {
			v := fmt.Sprintf("v%06d", r.IntN(1_000_000))
			key := fmt.Sprintf("m,k=%s,n=%d f", v, c.Len())
			c.AddAll(1, func(int) (string, point.Kind) { return key, point.KindFloat })
			if !seen[v] {
				seen[v] = true
				all = append(all, v)
			}
		}
		mi := c.idx.measurements["m"]
		if mi == nil {
			if len(all) != 0 {
				t.Fatalf("round %d: no index", round)
			}
			continue
		}
		vals := mi.keys["k"].values()
		got := make([]string, len(vals))
		for i, p := range vals {
			got[i] = p.value
		}
		want := slices.Clone(all)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: %d values %.200q..., want %d %.200q...", round, len(got), strings.Join(got, " "), len(want), strings.Join(want, " "))
		}
		earlier = append(earlier, held{vals, got})
		for _, e := range earlier {
			for i, p := range e.vals {
				if p.value != e.want[i] {
					t.Fatalf("round %d: a values list returned earlier changed at %d", round, i)
				}
			}
		}
	}
}
