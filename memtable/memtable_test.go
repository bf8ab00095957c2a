package memtable

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stratadb/strata/internal/point"
)

const (
	minT = math.MinInt64
	maxT = math.MaxInt64
)

func entry(id uint64, t int64, v point.Value) point.Entry {
	return point.Entry{ID: id, Time: t, Value: v}
}

func smp(t int64, v point.Value) point.Sample { return point.Sample{Time: t, Value: v} }

func samples(tab *Table, id uint64, mint, maxt int64) []point.Sample {
	return tab.Samples(id, mint, maxt, nil)
}

// wantSamples fails t unless got holds exactly want, in order.
func wantSamples(t *testing.T, what string, got, want []point.Sample) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d samples %v, want %d %v", what, len(got), got, len(want), want)
	}
	for i := range got {
		if got[i].Time != want[i].Time || !got[i].Value.Equal(want[i].Value) {
			t.Fatalf("%s: sample %d = {%d %v}, want {%d %v}", what, i,
				got[i].Time, got[i].Value, want[i].Time, want[i].Value)
		}
	}
}

// checkInvariants verifies the table's internal structure and that Bytes
// equals the memory its structures reference.
func checkInvariants(t *testing.T, tab *Table) {
	t.Helper()
	tab.mu.RLock()
	defer tab.mu.RUnlock()
	if size := unsafe.Sizeof(memSeries{}); unsafe.Sizeof(uintptr(0)) == 8 && size != 56 {
		t.Fatalf("memSeries is %d bytes, want 56", size)
	}
	a := &tab.arena
	want := int64(unsafe.Sizeof(Table{})) + int64(cap(tab.series))*int64(unsafe.Sizeof([]memSeries{})) +
		int64(len(tab.pages))*pageBytes + tab.scratch.bytes() + a.bytes()
	nseries := 0
	for i, p := range tab.series {
		want += int64(cap(p)) * int64(unsafe.Sizeof(memSeries{}))
		if i < len(tab.series)-1 && len(p) != seriesPage || cap(p) > seriesPage || len(p) == 0 {
			t.Fatalf("series page %d of %d holds %d", i, len(tab.series), len(p))
		}
		nseries += len(p)
	}
	if nseries != tab.nseries {
		t.Fatalf("%d series in pages, %d counted", nseries, tab.nseries)
	}
	slots := 0
	for pn, page := range tab.pages {
		for i, slot := range page {
			if slot == 0 {
				continue
			}
			slots++
			if id := pn<<pageBits | uint64(i); tab.slot(slot-1).id != id {
				t.Fatalf("slot %d of id %d names id %d", slot-1, id, tab.slot(slot-1).id)
			}
		}
	}
	if slots != nseries {
		t.Fatalf("pages hold %d slots for %d series", slots, nseries)
	}
	for i, sl := range a.slabs {
		if len(sl.times) != slabLen(i) || len(sl.vals) != len(sl.times) || len(sl.seqs) != len(sl.times) {
			t.Fatalf("slab %d: lengths %d/%d/%d", i, len(sl.times), len(sl.vals), len(sl.seqs))
		}
	}
	type extent struct{ slab, off, end int }
	var extents []extent                // of every chunk a series owns
	strRefs := make([]int, len(a.strs)) // samples naming each string
	listOwner := map[uint32]uint64{}
	var total int64
	for slot := range uint32(nseries) {
		s := tab.slot(slot)
		id := s.id
		owned := s.hs[:s.nh]
		if s.list != 0 {
			if prev, ok := listOwner[s.list]; ok {
				t.Fatalf("series %d and %d share chunk list %d", prev, id, s.list)
			}
			listOwner[s.list] = id
			owned = a.lists[s.list-1]
			if s.nch > 0 && s.hs[0] != owned[s.nch-1] {
				t.Fatalf("series %d: last chunk %#x, hs[0] %#x", id, owned[s.nch-1], s.hs[0])
			}
		} else if s.nh > inlineChunks {
			t.Fatalf("series %d: %d inline handles", id, s.nh)
		}
		if int(s.nch) > len(owned) {
			t.Fatalf("series %d: %d chunks, %d handles", id, s.nch, len(owned))
		}
		for k, h := range owned {
			e := extent{int(h >> maxSlabBits), int(h & (maxSlab - 1)), int(h&(maxSlab-1)) + chunkCap(k)}
			if e.slab >= len(a.slabs) || e.end > len(a.slabs[e.slab].times) || e.slab == len(a.slabs)-1 && e.end > a.used {
				t.Fatalf("series %d chunk %d: handle %#x outside the slabs carved", id, k, h)
			}
			extents = append(extents, e)
		}
		n := 0
		for k := range int(s.nch) {
			c := s.used(a, k)
			if len(c.times) == 0 || len(c.vals) != len(c.times) || len(c.seqs) != len(c.times) {
				t.Fatalf("series %d chunk %d: lengths %d/%d/%d", id, k, len(c.times), len(c.vals), len(c.seqs))
			}
			if k < int(s.nch)-1 && len(c.times) != chunkCap(k) || len(c.times) > chunkCap(k) {
				t.Fatalf("series %d chunk %d of %d holds %d of %d", id, k, s.nch, len(c.times), chunkCap(k))
			}
			if s.kind == point.KindString {
				for _, x := range c.vals {
					if x >= uint64(len(a.strs)) {
						t.Fatalf("series %d chunk %d: string %d of %d", id, k, x, len(a.strs))
					}
					strRefs[x]++
				}
			}
			for i, ts := range c.times {
				if lo, hi := s.bounds(); lo > ts || ts > hi {
					t.Fatalf("series %d: time %d outside bounds [%d, %d]", id, ts, lo, hi)
				}
				if !s.unsorted && n+i > 0 {
					prev := ts
					if i > 0 {
						prev = c.times[i-1]
					} else {
						prev = s.full(a, k-1).times[chunkCap(k-1)-1] // full
					}
					if prev > ts || prev == ts && !s.dups {
						t.Fatalf("series %d marked sorted but time %d follows %d", id, ts, prev)
					}
				}
			}
			n += len(c.times)
		}
		if s.empty() && s.tailN != 0 {
			t.Fatalf("empty series %d keeps a tail of %d", id, s.tailN)
		}
		if n != s.len() {
			t.Fatalf("series %d: len() = %d, chunks hold %d", id, s.len(), n)
		}
		if n > 0 {
			lo, hi := s.bounds()
			var held []int64
			for k := range int(s.nch) {
				held = append(held, s.used(a, k).times...)
			}
			if !slices.Contains(held, lo) || !slices.Contains(held, hi) {
				t.Fatalf("series %d: bounds [%d, %d] are not held times", id, lo, hi)
			}
			if !s.unsorted && (held[0] != lo || held[len(held)-1] != hi) {
				t.Fatalf("series %d: sorted from %d to %d, bounds [%d, %d]", id, held[0], held[len(held)-1], lo, hi)
			}
		}
		total += int64(n)
	}
	slices.SortFunc(extents, func(x, y extent) int { return cmp.Or(cmp.Compare(x.slab, y.slab), cmp.Compare(x.off, y.off)) })
	for i := 1; i < len(extents); i++ {
		if x, y := extents[i-1], extents[i]; x.slab == y.slab && x.end > y.off {
			t.Fatalf("chunks overlap in slab %d: [%d, %d) and [%d, %d)", x.slab, x.off, x.end, y.off, y.end)
		}
	}
	for x, refs := range strRefs {
		if refs > 1 || refs == 0 && a.strs[x] != "" {
			t.Fatalf("string %d (%q) named by %d samples", x, a.strs[x], refs)
		}
	}
	if got := tab.Bytes(); got != want {
		t.Fatalf("Bytes() = %d, structures hold %d", got, want)
	}
	if got := tab.Len(); got != total {
		t.Fatalf("Len() = %d, series hold %d", got, total)
	}
}

// TestSlabLen checks the slab sizes: doubling from minSlab to maxSlab, then
// maxSlab for every slab a handle can name.
func TestSlabLen(t *testing.T) {
	want := minSlab
	for k := range maxSlabs {
		if got := slabLen(k); got != want {
			t.Fatalf("slabLen(%d) = %d, want %d", k, got, want)
		}
		want = min(2*want, maxSlab)
	}
}

// TestReuseChunks checks that series emptied or shortened by deletes and
// DropSeq reuse their chunks as they grow again, short (inline handles) and
// long (a chunk list) alike: the table allocates nothing more.
func TestReuseChunks(t *testing.T) {
	for _, n := range []int{3, 10, 600} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			const series = 50
			kept := func(id uint64) int { return int(id % 3) } // samples a delete keeps
			// batch writes the samples of each series from time from(id) to n-1.
			batch := func(round int, from func(uint64) int) []point.Entry {
				var b []point.Entry
				for i := range n {
					for id := range uint64(series) {
						if i >= from(id) {
							b = append(b, entry(id, int64(i), point.Int(int64(round*n+i))))
						}
					}
				}
				return b
			}
			tab := New()
			tab.Apply(batch(0, func(uint64) int { return 0 }))
			full := tab.Bytes()
			for id := range uint64(series) {
				tab.Delete(id, int64(kept(id)), maxT) // empties a third of the series
			}
			tab.Apply(batch(1, kept))
			if got := tab.Bytes(); got != full {
				t.Fatalf("Bytes %d after deleting and writing again, %d before", got, full)
			}
			checkInvariants(t, tab)
			tab.DropSeq(tab.LastSeq())
			checkInvariants(t, tab)
			tab.Apply(batch(2, kept))
			if got := tab.Bytes(); got != full {
				t.Fatalf("Bytes %d after dropping a write and writing again, %d before", got, full)
			}
			for id := range uint64(series) {
				var want []point.Sample
				for i := range n {
					round := 2
					if i < kept(id) {
						round = 0
					}
					want = append(want, smp(int64(i), point.Int(int64(round*n+i))))
				}
				wantSamples(t, fmt.Sprintf("series %d", id), samples(tab, id, minT, maxT), want)
			}
			checkInvariants(t, tab)
		})
	}
}

// TestChunkCaps checks the chunk capacities: growing, at most maxChunk, and
// together a multiple of maxChunk.
func TestChunkCaps(t *testing.T) {
	for k := 1; k < len(chunkCaps)+3; k++ {
		if c, prev := chunkCap(k), chunkCap(k-1); c < prev || c > maxChunk || fullLen(k) != fullLen(k-1)+prev {
			t.Fatalf("chunk %d holds %d after %d, fullLen %d after %d", k, c, prev, fullLen(k), fullLen(k-1))
		}
	}
	if fullLen(len(chunkCaps))%maxChunk != 0 || fullLen(inlineChunks) != 10 {
		t.Fatalf("ramp holds %d samples, inline chunks %d", fullLen(len(chunkCaps)), fullLen(inlineChunks))
	}
}

func TestEmpty(t *testing.T) {
	tab := New()
	if tab.Len() != 0 || tab.MinTime() != math.MaxInt64 || tab.MaxTime() != math.MinInt64 {
		t.Fatalf("empty table: Len %d MinTime %d MaxTime %d", tab.Len(), tab.MinTime(), tab.MaxTime())
	}
	if ids := tab.IDs(); len(ids) != 0 {
		t.Fatalf("IDs() = %v, want none", ids)
	}
	if k, ok := tab.Kind(0); ok || k != point.KindInvalid {
		t.Fatalf("Kind(0) = %v, %v on empty table", k, ok)
	}
	if _, _, ok := tab.Bounds(3); ok {
		t.Fatalf("Bounds(3) ok on empty table")
	}
	dst := []point.Sample{{Time: 1, Value: point.Int(1)}}
	if got := tab.Samples(7, minT, maxT, dst); len(got) != 1 {
		t.Fatalf("Samples of unknown series changed dst: %v", got)
	}
	tab.Delete(7, minT, maxT) // no-op, no panic
	tab.Apply(nil)
	checkInvariants(t, tab)
}

func TestRoundTripKinds(t *testing.T) {
	values := map[point.Kind]func(i int) point.Value{
		point.KindFloat:  func(i int) point.Value { return point.Float(float64(i)*1.25 - 7) },
		point.KindInt:    func(i int) point.Value { return point.Int(int64(i)*-3 + math.MinInt64/2) },
		point.KindUint:   func(i int) point.Value { return point.Uint(math.MaxUint64 - uint64(i)) },
		point.KindBool:   func(i int) point.Value { return point.Bool(i%3 == 0) },
		point.KindString: func(i int) point.Value { return point.String(strings.Repeat("s", i%5) + fmt.Sprint(i)) },
	}
	const n = 600 // spans several chunks
	tab := New()
	want := map[uint64][]point.Sample{}
	for id, kind := range []point.Kind{point.KindFloat, point.KindInt, point.KindUint, point.KindBool, point.KindString} {
		var batch []point.Entry
		for i := range n {
			v := values[kind](i)
			ts := int64(i)*1000 - 5000
			batch = append(batch, entry(uint64(id), ts, v))
			want[uint64(id)] = append(want[uint64(id)], point.Sample{Time: ts, Value: v})
		}
		tab.Apply(batch[:n/2])
		tab.Apply(batch[n/2:])
	}
	for id, kind := range []point.Kind{point.KindFloat, point.KindInt, point.KindUint, point.KindBool, point.KindString} {
		what := kind.String()
		if k, ok := tab.Kind(uint64(id)); !ok || k != kind {
			t.Fatalf("%s: Kind = %v, %v", what, k, ok)
		}
		wantSamples(t, what, samples(tab, uint64(id), minT, maxT), want[uint64(id)])
		wantSamples(t, what+" range", samples(tab, uint64(id), -1000, 12000), want[uint64(id)][4:18])

		times, vals, strs := tab.Columns(uint64(id), minT, maxT, nil, nil, nil)
		if len(times) != n {
			t.Fatalf("%s: Columns returned %d times", what, len(times))
		}
		for i, s := range want[uint64(id)] {
			var v point.Value
			if kind == point.KindString {
				v = point.String(strs[i])
			} else {
				v = point.FromBits(kind, vals[i])
			}
			if times[i] != s.Time || !v.Equal(s.Value) {
				t.Fatalf("%s: Columns sample %d = {%d %v}, want {%d %v}", what, i, times[i], v, s.Time, s.Value)
			}
		}
		if kind == point.KindString && len(vals) != 0 || kind != point.KindString && len(strs) != 0 {
			t.Fatalf("%s: Columns filled the wrong value column: %d vals, %d strs", what, len(vals), len(strs))
		}
		if mint, maxt, ok := tab.Bounds(uint64(id)); !ok || mint != -5000 || maxt != (n-1)*1000-5000 {
			t.Fatalf("%s: Bounds = %d, %d, %v", what, mint, maxt, ok)
		}
	}
	if tab.Len() != 5*n || tab.MinTime() != -5000 || tab.MaxTime() != (n-1)*1000-5000 {
		t.Fatalf("Len %d MinTime %d MaxTime %d", tab.Len(), tab.MinTime(), tab.MaxTime())
	}
	// Samples appends to dst.
	dst := tab.Samples(1, -5000, -5000, []point.Sample{{Time: 42, Value: point.Int(42)}})
	wantSamples(t, "append to dst", dst, []point.Sample{{Time: 42, Value: point.Int(42)}, want[1][0]})
	checkInvariants(t, tab)
}

func TestOutOfOrderAndDuplicates(t *testing.T) {
	t.Run("within one apply", func(t *testing.T) {
		tab := New()
		tab.Apply([]point.Entry{
			entry(0, 5, point.Int(1)), entry(0, 3, point.Int(2)), entry(0, 5, point.Int(3)),
			entry(0, 1, point.Int(4)), entry(0, 3, point.Int(5)), entry(0, 5, point.Int(6)),
			entry(0, 4, point.Int(7)),
		})
		if tab.Len() != 7 {
			t.Fatalf("Len before read = %d, want 7", tab.Len())
		}
		want := []point.Sample{smp(1, point.Int(4)), smp(3, point.Int(5)), smp(4, point.Int(7)), smp(5, point.Int(6))}
		wantSamples(t, "first read", samples(tab, 0, minT, maxT), want)
		if tab.Len() != 4 {
			t.Fatalf("Len after dedup = %d, want 4", tab.Len())
		}
		wantSamples(t, "second read", samples(tab, 0, minT, maxT), want)
		wantSamples(t, "range", samples(tab, 0, 3, 4), want[1:3])
		checkInvariants(t, tab)
	})
	t.Run("across applies", func(t *testing.T) {
		tab := New()
		tab.Apply([]point.Entry{entry(0, 10, point.String("a")), entry(0, 20, point.String("b"))})
		wantSamples(t, "before", samples(tab, 0, minT, maxT), []point.Sample{smp(10, point.String("a")), smp(20, point.String("b"))})
		tab.Apply([]point.Entry{entry(0, 10, point.String("c"))})
		tab.Apply([]point.Entry{entry(0, 20, point.String("d")), entry(0, 15, point.String("e"))})
		tab.Apply([]point.Entry{entry(0, 20, point.String("f"))})
		wantSamples(t, "after", samples(tab, 0, minT, maxT),
			[]point.Sample{smp(10, point.String("c")), smp(15, point.String("e")), smp(20, point.String("f"))})
		checkInvariants(t, tab)
	})
	t.Run("adjacent duplicates in order", func(t *testing.T) {
		tab := New()
		tab.Apply([]point.Entry{
			entry(0, 1, point.Float(1)), entry(0, 2, point.Float(2)), entry(0, 2, point.Float(3)), entry(0, 3, point.Float(4)),
		})
		tab.Apply([]point.Entry{entry(0, 3, point.Float(5))})
		wantSamples(t, "read", samples(tab, 0, minT, maxT),
			[]point.Sample{smp(1, point.Float(1)), smp(2, point.Float(3)), smp(3, point.Float(5))})
		checkInvariants(t, tab)
	})
	t.Run("large reversed series", func(t *testing.T) {
		tab := New()
		const n = 2000
		var batch []point.Entry
		for i := range n {
			batch = append(batch, entry(3, int64(n-i), point.Float(float64(i))))
		}
		tab.Apply(batch)
		for i := range n / 2 { // rewrite the lower half
			batch[i] = entry(3, int64(i+1), point.Float(-float64(i)))
		}
		tab.Apply(batch[:n/2])
		got := samples(tab, 3, minT, maxT)
		if len(got) != n {
			t.Fatalf("got %d samples, want %d", len(got), n)
		}
		for i, s := range got {
			want := point.Float(float64(n - 1 - i))
			if i < n/2 {
				want = point.Float(-float64(i))
			}
			if s.Time != int64(i+1) || !s.Value.Equal(want) {
				t.Fatalf("sample %d = {%d %v}, want {%d %v}", i, s.Time, s.Value, i+1, want)
			}
		}
		checkInvariants(t, tab)
	})
}

func TestInclusiveBounds(t *testing.T) {
	tab := New()
	times := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}
	var batch []point.Entry
	var all []point.Sample
	for i, ts := range times {
		batch = append(batch, entry(0, ts, point.Uint(uint64(i))))
		all = append(all, point.Sample{Time: ts, Value: point.Uint(uint64(i))})
	}
	// Apply in reverse, then sorted order, so both read paths are covered.
	slices.Reverse(batch)
	tab.Apply(batch)
	if tab.MinTime() != math.MinInt64 || tab.MaxTime() != math.MaxInt64 {
		t.Fatalf("MinTime %d MaxTime %d", tab.MinTime(), tab.MaxTime())
	}
	cases := []struct {
		mint, maxt int64
		want       []point.Sample
	}{
		{minT, maxT, all},
		{minT, minT, all[:1]},
		{maxT, maxT, all[6:]},
		{-1, 1, all[2:5]},
		{0, 0, all[3:4]},
		{2, maxT - 2, nil},
		{minT + 1, maxT - 1, all[1:6]},
		{1, -1, nil},
		{maxT, minT, nil},
	}
	for _, c := range cases {
		wantSamples(t, fmt.Sprintf("[%d, %d]", c.mint, c.maxt), samples(tab, 0, c.mint, c.maxt), c.want)
		times, _, _ := tab.Columns(0, c.mint, c.maxt, nil, nil, nil)
		if len(times) != len(c.want) {
			t.Fatalf("Columns [%d, %d]: %d times, want %d", c.mint, c.maxt, len(times), len(c.want))
		}
	}
	tab.Delete(0, maxT, maxT)
	tab.Delete(0, minT, minT)
	wantSamples(t, "after deleting the extremes", samples(tab, 0, minT, maxT), all[1:6])
	if tab.MinTime() != math.MinInt64+1 || tab.MaxTime() != math.MaxInt64-1 {
		t.Fatalf("after delete: MinTime %d MaxTime %d", tab.MinTime(), tab.MaxTime())
	}
	checkInvariants(t, tab)
}

func TestDelete(t *testing.T) {
	const n = 1000
	entries := func(kind point.Kind) (batch []point.Entry, strBytes int64) {
		for i := range n {
			v := point.Float(float64(i))
			if kind == point.KindString {
				v = point.String(fmt.Sprintf("v%d", i))
				strBytes += int64(len(v.Str()))
			}
			batch = append(batch, entry(1, int64(i)*10, v))
		}
		return batch, strBytes
	}
	fill := func(kind point.Kind) *Table {
		tab := New()
		batch, _ := entries(kind)
		tab.Apply(batch)
		return tab
	}
	// columnBytes is Bytes without the string slots, which are not reused.
	columnBytes := func(tab *Table) int64 {
		return tab.Bytes() - int64(cap(tab.arena.strs))*int64(unsafe.Sizeof(""))
	}
	times := func(tab *Table, id uint64) []int64 {
		var ts []int64
		for _, s := range samples(tab, id, minT, maxT) {
			ts = append(ts, s.Time)
		}
		return ts
	}
	for _, kind := range []point.Kind{point.KindFloat, point.KindString} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Run("whole", func(t *testing.T) {
				tab := fill(kind)
				before := tab.Bytes()
				batch, strBytes := entries(kind)
				tab.Delete(1, minT, maxT)
				if got := samples(tab, 1, minT, maxT); len(got) != 0 {
					t.Fatalf("%d samples left", len(got))
				}
				if _, ok := tab.Kind(1); ok || tab.Len() != 0 || len(tab.IDs()) != 0 {
					t.Fatalf("emptied series still present: Len %d IDs %v", tab.Len(), tab.IDs())
				}
				if tab.MinTime() != math.MaxInt64 || tab.MaxTime() != math.MinInt64 {
					t.Fatalf("empty table: MinTime %d MaxTime %d", tab.MinTime(), tab.MaxTime())
				}
				// Deleting releases the strings; the series keeps its chunks
				// and reuses them when written again.
				if got := tab.Bytes(); got != before-strBytes {
					t.Fatalf("Bytes %d after deleting everything, %d before, %d of strings", got, before, strBytes)
				}
				checkInvariants(t, tab)
				columns := columnBytes(tab)
				tab.Apply(batch)
				if got := columnBytes(tab); got != columns+strBytes {
					t.Fatalf("writing the series again: Bytes without string slots %d, was %d", got, columns)
				}
				wantSamples(t, "written again", samples(tab, 1, minT, maxT), samples(fill(kind), 1, minT, maxT))
				checkInvariants(t, tab)
			})
			t.Run("exact whole", func(t *testing.T) {
				tab := fill(kind)
				tab.Delete(1, 0, (n-1)*10)
				if tab.Len() != 0 {
					t.Fatalf("Len %d", tab.Len())
				}
				checkInvariants(t, tab)
			})
			t.Run("middle", func(t *testing.T) {
				tab := fill(kind)
				tab.Delete(1, 100, 5000) // removes times 100..5000: samples 10..500
				ts := times(tab, 1)
				if len(ts) != n-491 || ts[9] != 90 || ts[10] != 5010 {
					t.Fatalf("after delete: %d samples, around the gap %v", len(ts), ts[8:12])
				}
				if tab.Len() != n-491 || tab.MinTime() != 0 || tab.MaxTime() != (n-1)*10 {
					t.Fatalf("Len %d MinTime %d MaxTime %d", tab.Len(), tab.MinTime(), tab.MaxTime())
				}
				got := samples(tab, 1, 5010, 5010)
				if len(got) != 1 || (kind == point.KindFloat && got[0].Value.Float() != 501) ||
					(kind == point.KindString && got[0].Value.Str() != "v501") {
					t.Fatalf("sample after the gap = %v", got)
				}
				checkInvariants(t, tab)
			})
			t.Run("ends", func(t *testing.T) {
				tab := fill(kind)
				tab.Delete(1, minT, 995)
				tab.Delete(1, 9000, maxT)
				ts := times(tab, 1)
				if len(ts) != 800 || ts[0] != 1000 || ts[len(ts)-1] != 8990 {
					t.Fatalf("%d samples from %d to %d", len(ts), ts[0], ts[len(ts)-1])
				}
				if tab.MinTime() != 1000 || tab.MaxTime() != 8990 {
					t.Fatalf("MinTime %d MaxTime %d", tab.MinTime(), tab.MaxTime())
				}
				checkInvariants(t, tab)
			})
			t.Run("none", func(t *testing.T) {
				tab := fill(kind)
				bytes := tab.Bytes()
				tab.Delete(1, 11, 19)      // a gap between samples
				tab.Delete(1, 10000, maxT) // after the last sample
				tab.Delete(1, minT, -1)    // before the first
				tab.Delete(1, 500, 100)    // empty range
				tab.Delete(0, minT, maxT)  // an empty series
				tab.Delete(99, minT, maxT) // an unknown series
				if ts := times(tab, 1); len(ts) != n || tab.Len() != n || tab.Bytes() != bytes {
					t.Fatalf("%d samples, Len %d, Bytes %d (was %d)", len(ts), tab.Len(), tab.Bytes(), bytes)
				}
				checkInvariants(t, tab)
			})
			t.Run("apply after delete", func(t *testing.T) {
				tab := fill(kind)
				tab.Delete(1, 100, 5000)
				v := point.Float(-1)
				if kind == point.KindString {
					v = point.String("new")
				}
				tab.Apply([]point.Entry{entry(1, 200, v), entry(1, 205, v)})
				got := samples(tab, 1, 100, 5000)
				wantSamples(t, "re-applied", got, []point.Sample{smp(200, v), smp(205, v)})
				tab.Delete(1, minT, maxT)
				tab.Apply([]point.Entry{entry(1, 7, v)})
				wantSamples(t, "after delete of all", samples(tab, 1, minT, maxT), []point.Sample{smp(7, v)})
				if tab.MinTime() != 7 || tab.MaxTime() != 7 || tab.Len() != 1 {
					t.Fatalf("MinTime %d MaxTime %d Len %d", tab.MinTime(), tab.MaxTime(), tab.Len())
				}
				checkInvariants(t, tab)
			})
		})
	}
	t.Run("unsorted series", func(t *testing.T) {
		tab := New()
		tab.Apply([]point.Entry{
			entry(0, 9, point.Int(1)), entry(0, 2, point.Int(2)), entry(0, 5, point.Int(3)),
			entry(0, 2, point.Int(4)), entry(0, 7, point.Int(5)),
		})
		tab.Delete(0, 5, 8)
		tab.Apply([]point.Entry{entry(0, 1, point.Int(6))})
		wantSamples(t, "after delete", samples(tab, 0, minT, maxT),
			[]point.Sample{smp(1, point.Int(6)), smp(2, point.Int(4)), smp(9, point.Int(1))})
		checkInvariants(t, tab)
	})
}

func TestIDs(t *testing.T) {
	tab := New()
	tab.Apply([]point.Entry{
		entry(7, 1, point.Bool(true)), entry(2, 1, point.Bool(true)), entry(5, 1, point.Bool(true)),
		entry(0, 1, point.Bool(true)), entry(5, 2, point.Bool(false)),
	})
	if got := tab.IDs(); !slices.Equal(got, []uint64{0, 2, 5, 7}) {
		t.Fatalf("IDs() = %v", got)
	}
	tab.Delete(2, 0, 10)
	tab.Delete(5, 2, 2)
	if got := tab.IDs(); !slices.Equal(got, []uint64{0, 5, 7}) {
		t.Fatalf("after delete, IDs() = %v", got)
	}
	for _, id := range []uint64{1, 2, 3, 100} {
		if k, ok := tab.Kind(id); ok || k != point.KindInvalid {
			t.Fatalf("Kind(%d) = %v, %v", id, k, ok)
		}
	}
	if k, ok := tab.Kind(5); !ok || k != point.KindBool {
		t.Fatalf("Kind(5) = %v, %v", k, ok)
	}
	checkInvariants(t, tab)
}

func TestBytes(t *testing.T) {
	const series, perSeries = 1000, 1000
	tab := New()
	prev := tab.Bytes()
	lastStep := prev
	if prev <= 0 {
		t.Fatalf("empty table Bytes() = %d", prev)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	batch := make([]point.Entry, 0, series*10)
	for step := range perSeries / 10 {
		batch = batch[:0]
		for ts := step * 10; ts < step*10+10; ts++ {
			for id := range series {
				batch = append(batch, entry(uint64(id), int64(ts)*1e9, point.Float(float64(id+ts)/100)))
			}
		}
		tab.Apply(batch)
		// Bytes never shrinks while data is added, and grows at least once
		// per maxChunk samples per series (a new chunk for each series).
		b := tab.Bytes()
		if b < prev {
			t.Fatalf("after batch %d Bytes() = %d, was %d", step, b, prev)
		}
		if step%(maxChunk/10+1) == 0 {
			if b <= lastStep {
				t.Fatalf("after batch %d Bytes() = %d, no growth since %d", step, b, lastStep)
			}
			lastStep = b
		}
		prev = b
	}
	batch = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(tab)

	columns := int64(series*perSeries) * 16 // one int64 time and one uint64 value per sample
	got := tab.Bytes()
	if got < columns || got > 2*columns {
		t.Fatalf("Bytes() = %d, column memory %d: want within 2x", got, columns)
	}
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if heap < columns || got < heap/2 || got > 2*heap {
		t.Fatalf("Bytes() = %d, measured heap growth %d: want within 2x", got, heap)
	}
	t.Logf("Bytes %d, columns %d, heap growth %d", got, columns, heap)

	// Strings count their bytes; deleting them releases those bytes.
	strs := New()
	long := strings.Repeat("x", 1000)
	strs.Apply([]point.Entry{entry(0, 1, point.String(long)), entry(0, 2, point.String("y"))})
	withStrings := strs.Bytes()
	if withStrings < 1001 {
		t.Fatalf("Bytes() = %d with 1001 bytes of strings", withStrings)
	}
	strs.Delete(0, 1, 1)
	if got := strs.Bytes(); got != withStrings-1000 {
		t.Fatalf("after deleting a 1000-byte string Bytes() = %d, was %d", got, withStrings)
	}
	// Duplicates collapsed by a read release their strings (the string
	// slots are not reused).
	capStrs := cap(strs.arena.strs)
	strs.Apply([]point.Entry{entry(0, 2, point.String(long))})
	strs.Samples(0, minT, maxT, nil)
	checkInvariants(t, strs)
	// 1000 bytes deleted, 1000 added, the 1-byte string replaced, plus the
	// sort's working memory.
	if got, want := strs.Bytes(), withStrings-1+strs.scratch.bytes()+int64(cap(strs.arena.strs)-capStrs)*int64(unsafe.Sizeof("")); got != want {
		t.Fatalf("after replacing a string Bytes() = %d, want %d", got, want)
	}
}

// model is the reference the randomized test checks the table against.
type model map[uint64]map[int64]point.Value

func (m model) samples(id uint64, mint, maxt int64) []point.Sample {
	var out []point.Sample
	for ts, v := range m[id] {
		if ts >= mint && ts <= maxt {
			out = append(out, point.Sample{Time: ts, Value: v})
		}
	}
	slices.SortFunc(out, func(a, b point.Sample) int {
		switch {
		case a.Time < b.Time:
			return -1
		case a.Time > b.Time:
			return 1
		}
		return 0
	})
	return out
}

func TestRandomizedAgainstModel(t *testing.T) {
	kinds := []point.Kind{point.KindFloat, point.KindInt, point.KindUint, point.KindBool, point.KindString}
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 77))
			const ids = 12
			span := int64(20 + rng.IntN(600)) // small spans make many duplicates
			randTime := func() int64 {
				switch rng.IntN(40) {
				case 0:
					return math.MinInt64 + rng.Int64N(2)
				case 1:
					return math.MaxInt64 - rng.Int64N(2)
				}
				return rng.Int64N(span) - span/2
			}
			randValue := func(id uint64) point.Value {
				switch kinds[id%5] {
				case point.KindFloat:
					return point.Float(rng.NormFloat64())
				case point.KindInt:
					return point.Int(rng.Int64() - math.MaxInt64/2)
				case point.KindUint:
					return point.Uint(rng.Uint64())
				case point.KindBool:
					return point.Bool(rng.IntN(2) == 0)
				}
				return point.String(strings.Repeat("z", rng.IntN(20)))
			}
			randRange := func() (int64, int64) {
				a, b := randTime(), randTime()
				if rng.IntN(10) != 0 && a > b {
					a, b = b, a
				}
				return a, b
			}

			tab, m := New(), model{}
			var batch []point.Entry
			for op := range 400 {
				switch r := rng.IntN(10); {
				case r < 5:
					batch = batch[:0]
					n := rng.IntN(300)
					sequential := rng.IntN(3) == 0
					base := randTime()
					for i := range n {
						id := uint64(rng.IntN(ids))
						if rng.IntN(4) == 0 {
							id = uint64(rng.IntN(3)) // a few hot series
						}
						ts := randTime()
						if sequential && base < math.MaxInt64-int64(n) {
							ts = base + int64(i)
						}
						v := randValue(id)
						batch = append(batch, entry(id, ts, v))
						if m[id] == nil {
							m[id] = map[int64]point.Value{}
						}
						m[id][ts] = v
					}
					tab.Apply(batch)
				case r < 7:
					id := uint64(rng.IntN(ids + 2))
					mint, maxt := randRange()
					tab.Delete(id, mint, maxt)
					for ts := range m[id] {
						if ts >= mint && ts <= maxt {
							delete(m[id], ts)
						}
					}
				default:
					id := uint64(rng.IntN(ids + 2))
					mint, maxt := randRange()
					if rng.IntN(4) == 0 {
						mint, maxt = math.MinInt64, math.MaxInt64
					}
					what := fmt.Sprintf("op %d: series %d [%d, %d]", op, id, mint, maxt)
					wantSamples(t, what, samples(tab, id, mint, maxt), m.samples(id, mint, maxt))
				}
				if op%25 == 0 {
					checkInvariants(t, tab)
				}
			}

			// Final state: read everything, which collapses all duplicates.
			var wantIDs []uint64
			wantMin, wantMax, total := int64(math.MaxInt64), int64(math.MinInt64), 0
			for _, id := range slices.Sorted(maps.Keys(m)) {
				if len(m[id]) == 0 {
					continue
				}
				wantIDs = append(wantIDs, id)
				for ts := range m[id] {
					wantMin, wantMax = min(wantMin, ts), max(wantMax, ts)
				}
				total += len(m[id])
				if k, ok := tab.Kind(id); !ok || k != kinds[id%5] {
					t.Fatalf("Kind(%d) = %v, %v", id, k, ok)
				}
			}
			if got := tab.IDs(); !slices.Equal(got, wantIDs) {
				t.Fatalf("IDs() = %v, want %v", got, wantIDs)
			}
			if tab.MinTime() != wantMin || tab.MaxTime() != wantMax {
				t.Fatalf("MinTime %d MaxTime %d, want %d %d", tab.MinTime(), tab.MaxTime(), wantMin, wantMax)
			}
			if tab.Len() < int64(total) {
				t.Fatalf("Len() = %d below the %d distinct samples", tab.Len(), total)
			}
			for id := range uint64(ids) {
				wantSamples(t, fmt.Sprintf("final series %d", id), samples(tab, id, minT, maxT), m.samples(id, minT, maxT))
			}
			if tab.Len() != int64(total) {
				t.Fatalf("after reading everything Len() = %d, want %d", tab.Len(), total)
			}
			checkInvariants(t, tab)
		})
	}
}

// TestConcurrentReaders runs one writer (out-of-order batches, duplicates,
// deletes) against readers that check every read is sorted, deduplicated
// and never goes back to an older value.
func TestConcurrentReaders(t *testing.T) {
	const (
		ids     = 16
		rounds  = 150
		readers = 4
		window  = 64 // timestamps per series are 0..window-1
	)
	// A value encodes its timestamp and the round that wrote it.
	value := func(round, ts int) point.Value { return point.Int(int64(round)<<32 | int64(ts)) }

	tab := New()
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		defer done.Store(true)
		rng := rand.New(rand.NewPCG(1, 2))
		batch := make([]point.Entry, 0, 256)
		for round := 1; round <= rounds; round++ {
			batch = batch[:0]
			for range 100 {
				ts := rng.IntN(window)
				batch = append(batch, entry(uint64(rng.IntN(ids)), int64(ts), value(round, ts)))
			}
			tab.Apply(batch)
			if round%10 == 0 {
				lo := int64(rng.IntN(window))
				tab.Delete(uint64(rng.IntN(ids)), lo, lo+int64(rng.IntN(8)))
			}
		}
	})
	var failures atomic.Int64
	for r := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 3))
			seen := make([][window]int64, ids) // newest round seen per series and time
			var dst []point.Sample
			for i := 0; !done.Load() || i < 50; i++ {
				id := uint64(rng.IntN(ids))
				mint := int64(rng.IntN(window)) - 4
				maxt := mint + int64(rng.IntN(window))
				dst = tab.Samples(id, mint, maxt, dst[:0])
				for j, s := range dst {
					v := s.Value.Int()
					round, ts := v>>32, v&(1<<32-1)
					bad := s.Value.Kind() != point.KindInt || ts != s.Time || ts >= window ||
						s.Time < mint || s.Time > maxt ||
						(j > 0 && dst[j-1].Time >= s.Time) ||
						round < seen[id][ts]
					if bad {
						failures.Add(1)
						t.Errorf("reader %d: series %d [%d, %d]: sample %d = {%d %d}, previous round seen %d",
							r, id, mint, maxt, j, s.Time, v, seen[id][min(ts, window-1)])
						return
					}
					seen[id][ts] = round
				}
				if k, ok := tab.Kind(id); ok && k != point.KindInt {
					t.Errorf("Kind(%d) = %v", id, k)
				}
				for _, x := range tab.IDs() {
					if x >= ids {
						t.Errorf("IDs() returned %d", x)
					}
				}
				if tab.Bytes() <= 0 || tab.Len() < 0 {
					t.Errorf("Bytes %d Len %d", tab.Bytes(), tab.Len())
				}
				if lo := tab.MinTime(); lo != math.MaxInt64 && (lo < 0 || lo >= window) {
					t.Errorf("MinTime() = %d", lo)
				}
				if hi := tab.MaxTime(); hi != math.MinInt64 && (hi < 0 || hi >= window) {
					t.Errorf("MaxTime() = %d", hi)
				}
			}
		})
	}
	wg.Wait()
	if failures.Load() == 0 {
		checkInvariants(t, tab)
	}
}
