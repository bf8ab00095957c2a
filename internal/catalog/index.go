package catalog

import (
	"cmp"
	"context"
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"

	"github.com/stratadb/strata/internal/point"
)

// The inverted index answers selectors without looking at every series.
//
// Per measurement it keeps the ids of its series and, per tag key, a
// postings list (ascending series ids) per value plus the key's distinct
// values in sorted order. Series ids are dense and only ever added in
// ascending order, so every postings list is built by appending.
//
// A matcher that does not match the empty value (k="v", k=~"re" where ""
// fails, k!="") selects a union of postings: an equality one list, a
// regexp the lists of the sorted values it matches, tested only from its
// literal prefix on. A matcher that matches "" (k!="v", k!~"re", k="")
// selects the measurement's series minus the union of the values it
// rejects. Positive sets are intersected smallest first; negative ones are
// subtracted from the result.
//
// The index is guarded by Catalog.mu, except each key's sorted values,
// which the first reader after new values arrived merges under the key's
// own mutex.
type index struct {
	measurements map[string]*measIndex
	sorted       []string // measurement names, sorted; rebuilt when one is added

	// The postings of every key, numbered in the order they were added,
	// in slabs of slabLen: most values of a high-cardinality key (a
	// device id) have one series, and a heap object per value made
	// loading a million series slow.
	postDir []*[slabLen]posting
	npost   uint32

	lastName string // the measurement add saw last, and its index
	lastMeas *measIndex
}

// slabLen is the number of postings per slab.
const slabLen = 1024

type measIndex struct {
	ids  []uint64 // every series of the measurement
	keys map[string]*keyIndex

	// The keys of the tags last added, by position: series of one
	// measurement mostly share their tag keys, so add finds them here
	// without a map lookup.
	recent []*keyIndex
}

type keyIndex struct {
	key string
	x   *index // whose postDir the references of postings are to
	// postings holds the values by their hash (valueHash). Keyed by the
	// hash rather than the value, the table grows without hashing every
	// value again: at a million values (a device id), growing a map
	// keyed by string spent more time re-reading and re-hashing the
	// values than adding them.
	postings refTable
	n        int // series holding the key

	mu     sync.Mutex
	sorted []*posting  // by value; the slice is never modified once published
	fresh  postingList // values added since sorted was built (postinglist.go)
}

// posting is one value of a key and its series. ids grows under
// Catalog.mu.
type posting struct {
	value string
	// The ids, ascending (see ids): first holds the one id of a value of
	// one series, the common case of a high-cardinality key, and more
	// every id once there are two or more. A posting is 32 bytes; with
	// a slice of its own for one id it was 48.
	first [1]uint64
	more  *[]uint64
}

// ids returns p's ids, ascending. The caller holds Catalog.mu (for
// reading, unless it is the writer) while it reads them.
func (p *posting) ids() []uint64 {
	if p.more != nil {
		return *p.more
	}
	return p.first[:]
}

// add appends id, above every id p holds.
func (p *posting) add(id uint64) {
	if p.more == nil {
		more := make([]uint64, 1, 4)
		more[0] = p.first[0]
		p.more = &more
	}
	*p.more = appendID(*p.more, id)
}

// valueSeed seeds valueHash; the hashes are never stored.
var valueSeed = maphash.MakeSeed()

// valueHash is the key of a value in keyIndex.postings.
func valueHash(v string) uint64 { return maphash.String(valueSeed, v) }

// posting returns the posting of value v, or nil.
func (ki *keyIndex) posting(v string) *posting {
	return ki.postingOf(valueHash(v), v)
}

// postingOf is posting with v's hash h computed.
func (ki *keyIndex) postingOf(h uint64, v string) *posting {
	for r, i := ki.postings.first(h); r != 0; r, i = ki.postings.next(h, i) {
		if p := ki.x.postingAt(r); p.value == v {
			return p
		}
	}
	return nil
}

// postingAt returns the posting of reference r (its number + 1).
func (x *index) postingAt(r uint32) *posting {
	i := r - 1
	return &x.postDir[i/slabLen][i%slabLen]
}

func newIndex() index { return index{measurements: make(map[string]*measIndex)} }

// add indexes series id. The caller holds Catalog.mu for writing; ids are
// added in ascending order.
func (x *index) add(id uint64, measurement string, tags []point.Tag) {
	mi := x.lastMeas
	if mi == nil || x.lastName != measurement {
		mi = x.measurements[measurement]
	}
	if mi == nil {
		mi = &measIndex{keys: make(map[string]*keyIndex)}
		x.measurements[measurement] = mi
		i, _ := slices.BinarySearch(x.sorted, measurement)
		x.sorted = slices.Insert(slices.Clip(x.sorted), i, measurement)
	}
	x.lastName, x.lastMeas = measurement, mi
	mi.ids = appendID(mi.ids, id)
	for j, t := range tags {
		var ki *keyIndex
		if j < len(mi.recent) && mi.recent[j].key == t.Key {
			ki = mi.recent[j]
		} else {
			ki = mi.keys[t.Key]
			if ki == nil {
				ki = &keyIndex{key: t.Key, x: x}
				mi.keys[t.Key] = ki
			}
			if j < len(mi.recent) {
				mi.recent[j] = ki
			} else {
				mi.recent = append(mi.recent, ki)
			}
		}
		h := valueHash(t.Value)
		p := ki.postingOf(h, t.Value)
		if p == nil {
			var r uint32
			p, r = x.newPosting(t.Value, id)
			ki.postings.insert(h, r)
			ki.mu.Lock()
			ki.fresh.push(p)
			ki.mu.Unlock()
		} else {
			p.add(id)
		}
		ki.n++
	}
}

// appendID appends id to ids, doubling a full slice's capacity. append
// grows large slices by a quarter, so a list of n ids would have
// allocated about 5n ids' room by the time it holds them: the lists of a
// measurement and of a low-cardinality tag value hold every series.
func appendID(ids []uint64, id uint64) []uint64 {
	if len(ids) == cap(ids) && len(ids) >= 256 {
		ids = append(make([]uint64, 0, 2*len(ids)), ids...)
	}
	return append(ids, id)
}

// newPosting returns a posting of value holding id, from the slabs, and
// its reference.
func (x *index) newPosting(value string, id uint64) (*posting, uint32) {
	i := x.npost
	if i == math.MaxUint32 {
		// A posting per distinct value of every tag key: 4 billion of
		// them need hundreds of gigabytes of catalog first.
		panic("catalog: more than 2^32-1 tag values")
	}
	if i%slabLen == 0 {
		x.postDir = append(x.postDir, new([slabLen]posting))
	}
	p := &x.postDir[i/slabLen][i%slabLen]
	x.npost++
	p.value, p.first[0] = value, id
	return p, i + 1
}

// values returns the key's distinct values with their postings, sorted by
// value. The slice is shared: callers must not modify it, and read the
// postings' ids under Catalog.mu.
func (ki *keyIndex) values() []*posting {
	ki.mu.Lock()
	defer ki.mu.Unlock()
	if ki.fresh.n > 0 {
		// The fresh values go to the front of the merged slice and are
		// sorted there; the sorted ones (never modified: readers may hold
		// them) are merged in from the back, which never overwrites a
		// fresh value not yet placed.
		merged := make([]*posting, len(ki.sorted)+ki.fresh.n)
		fresh := ki.fresh.appendTo(merged[:0])
		slices.SortFunc(fresh, func(a, b *posting) int { return strings.Compare(a.value, b.value) })
		i, j := len(ki.sorted), len(fresh)
		for k := len(merged) - 1; i > 0; k-- {
			if j > 0 && fresh[j-1].value > ki.sorted[i-1].value {
				j--
				merged[k] = fresh[j]
			} else {
				i--
				merged[k] = ki.sorted[i]
			}
		}
		ki.sorted, ki.fresh = merged, postingList{}
	}
	return ki.sorted
}

// matching returns the values of the key that m matches (all when m
// matches every non-empty value, as with `=~".+"`, the caller sees a long
// list). Regexps test only the values from their literal prefix on.
func (ki *keyIndex) matching(m *Matcher, want bool, visit func(p *posting)) {
	switch m.op {
	case point.MatchEqual, point.MatchNotEqual:
		// Only the one value differs between "matched" and "not matched".
		eq := m.op == point.MatchEqual
		if eq == want {
			if p := ki.posting(m.value); p != nil {
				visit(p)
			}
			return
		}
		for _, p := range ki.values() {
			if p.value != m.value {
				visit(p)
			}
		}
		return
	}
	vals := ki.values()
	if want == (m.op == point.MatchRegexp) && m.prefix != "" {
		// Only values starting with the prefix can match (or, for !~, fail).
		lo, _ := slices.BinarySearchFunc(vals, m.prefix, func(p *posting, pre string) int { return strings.Compare(p.value, pre) })
		for _, p := range vals[lo:] {
			if !strings.HasPrefix(p.value, m.prefix) {
				break
			}
			if m.matches(p.value) == want {
				visit(p)
			}
		}
		return
	}
	for _, p := range vals {
		if m.matches(p.value) == want {
			visit(p)
		}
	}
}

// idSet is a bitmap of series ids for unions and subtractions.
type idSet []uint64

func newIDSet(n int) idSet { return make(idSet, (n+63)/64) }

func (s idSet) add(id uint64)      { s[id/64] |= 1 << (id % 64) }
func (s idSet) has(id uint64) bool { return id/64 < uint64(len(s)) && s[id/64]&(1<<(id%64)) != 0 }

func (s idSet) addAll(ids []uint64) {
	for _, id := range ids {
		s.add(id)
	}
}

// appendIDs appends the ids in s, ascending.
func (s idSet) appendIDs(dst []uint64) []uint64 {
	for w, word := range s {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			dst = append(dst, uint64(w*64+b))
			word &= word - 1
		}
	}
	return dst
}

// intersect returns the ids in both ascending lists.
func intersect(a, b []uint64) []uint64 {
	if len(a) > len(b) {
		a, b = b, a
	}
	out := make([]uint64, 0, len(a))
	j := 0
	for _, id := range a {
		// Gallop: b is usually much longer than a.
		k, _ := slices.BinarySearch(b[j:], id)
		j += k
		if j == len(b) {
			break
		}
		if b[j] == id {
			out = append(out, id)
			j++
		}
	}
	return out
}

// selectIDs returns the ascending ids of mi's series that pass ms.
// nseries bounds the ids (catalog size).
func (mi *measIndex) selectIDs(ms []Matcher, nseries int) []uint64 {
	var sets [][]uint64 // positive sets to intersect
	var negs []*Matcher
	for i := range ms {
		m := &ms[i]
		if m.matchesEmpty {
			negs = append(negs, m)
			continue
		}
		ki := mi.keys[m.key]
		if ki == nil {
			return nil // no series has the key, and m needs a value
		}
		if m.op == point.MatchEqual {
			p := ki.posting(m.value)
			if p == nil {
				return nil
			}
			sets = append(sets, p.ids())
			continue
		}
		sets = append(sets, ki.union(m, true, nseries))
		if len(sets[len(sets)-1]) == 0 {
			return nil
		}
	}
	var cand []uint64
	if len(sets) == 0 {
		cand = mi.ids
	} else {
		slices.SortFunc(sets, func(a, b []uint64) int { return len(a) - len(b) })
		cand = sets[0]
		for _, s := range sets[1:] {
			cand = intersect(cand, s)
			if len(cand) == 0 {
				return nil
			}
		}
	}
	for _, m := range negs {
		ki := mi.keys[m.key]
		if ki == nil {
			continue // every series lacks the key, and m matches ""
		}
		var drop []uint64
		if m.op == point.MatchNotEqual {
			if p := ki.posting(m.value); p != nil {
				drop = p.ids()
			}
		} else {
			drop = ki.union(m, false, nseries)
		}
		if len(drop) == 0 {
			continue
		}
		cand = subtract(cand, drop)
		if len(cand) == 0 {
			return nil
		}
	}
	return cand
}

// union returns the ascending ids of the values for which m's verdict is
// want.
func (ki *keyIndex) union(m *Matcher, want bool, nseries int) []uint64 {
	var lists [][]uint64
	total := 0
	ki.matching(m, want, func(p *posting) {
		ids := p.ids()
		lists = append(lists, ids)
		total += len(ids)
	})
	switch len(lists) {
	case 0:
		return nil
	case 1:
		return lists[0]
	}
	if total*8 < nseries/8 {
		// Few ids: sort them rather than sweep a bitmap of every id.
		out := make([]uint64, 0, total)
		for _, l := range lists {
			out = append(out, l...)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	set := newIDSet(nseries)
	for _, l := range lists {
		set.addAll(l)
	}
	return set.appendIDs(make([]uint64, 0, total))
}

// subtract returns the ids of a that are not in b, both ascending.
func subtract(a, b []uint64) []uint64 {
	out := make([]uint64, 0, len(a))
	j := 0
	for _, id := range a {
		for j < len(b) && b[j] < id {
			j++
		}
		if j < len(b) && b[j] == id {
			continue
		}
		out = append(out, id)
	}
	return out
}

// Match returns the ids of the series that sel selects (its measurement,
// or every measurement when it is "", its field, tags and matchers),
// ascending. sel must have been validated.
func (c *Catalog) Match(sel *point.Selector) []uint64 {
	ms, ok := CompileStoredSelector(sel)
	if !ok {
		return nil
	}
	return c.MatchCompiled(sel, ms)
}

// MatchCompiled is Match with sel's matchers compiled (ms).
func (c *Catalog) MatchCompiled(sel *point.Selector, ms []Matcher) []uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []uint64
	for _, mi := range c.measIndexes(sel.Measurement) {
		ids := c.fieldFilter(mi.selectIDs(ms, c.series.n), sel.Field)
		if len(out) == 0 {
			out = slices.Clone(ids)
		} else {
			out = append(out, ids...)
		}
	}
	if sel.Measurement == "" {
		slices.Sort(out)
	}
	return out
}

// fieldFilter returns the ids of field (all when it is ""), in a new slice
// when some are dropped. The caller holds mu.RLock.
func (c *Catalog) fieldFilter(ids []uint64, field string) []uint64 {
	if field == "" {
		return ids
	}
	return slices.DeleteFunc(slices.Clone(ids), func(id uint64) bool { return c.series.at(id).Field != field })
}

// measIndexes returns the index of measurement, or of every measurement
// (sorted by name) when it is "". The caller holds mu.RLock.
func (c *Catalog) measIndexes(measurement string) []*measIndex {
	if measurement != "" {
		if mi := c.idx.measurements[measurement]; mi != nil {
			return []*measIndex{mi}
		}
		return nil
	}
	out := make([]*measIndex, 0, len(c.idx.sorted))
	for _, m := range c.idx.sorted {
		out = append(out, c.idx.measurements[m])
	}
	return out
}

// keyOrder ranks series ids by canonical key, so that results are sorted
// by comparing integers, not key strings. It covers the ids below
// len(ranks) and is rebuilt (one sort of every key) only when many series
// were added since; newer ids are placed by comparing keys.
type keyOrder struct {
	mu     sync.Mutex
	ranks  []uint32 // rank of each id; never modified once published
	byRank []uint32 // id at each rank
}

// orderFor returns ranks and byRank covering at least most of the catalog
// (with rebuild; without it, whatever they cover now).
func (c *Catalog) orderFor(rebuild bool) (ranks, byRank []uint32) {
	o := &c.order
	o.mu.Lock()
	defer o.mu.Unlock()
	c.mu.RLock()
	n := c.series.n
	if rebuild && n > len(o.ranks)+len(o.ranks)/4+1024 && uint64(n) < math.MaxUint32 {
		ids := make([]uint32, n)
		for i := range ids {
			ids[i] = uint32(i)
		}
		slices.SortFunc(ids, func(a, b uint32) int { return strings.Compare(c.series.at(uint64(a)).Key, c.series.at(uint64(b)).Key) })
		ranks := make([]uint32, n)
		for r, id := range ids {
			ranks[id] = uint32(r)
		}
		o.ranks, o.byRank = ranks, ids
	}
	c.mu.RUnlock()
	return o.ranks, o.byRank
}

// SortByKey sorts ids (distinct) by canonical series key.
func (c *Catalog) SortByKey(ids []uint64) { c.SortByKeyRanks(ids, true) }

// SortByKeyRanks is SortByKey; with rebuild false it uses the key ranks
// as they are rather than sorting every key of a catalog that grew, which
// a flush in a burst of new series would otherwise do again and again.
func (c *Catalog) SortByKeyRanks(ids []uint64, rebuild bool) {
	if len(ids) < 2 {
		return
	}
	ranks, byRank := c.orderFor(rebuild)
	n := uint64(len(ranks))
	fresh := false
	for _, id := range ids {
		if id >= n {
			fresh = true
			break
		}
	}
	if !fresh && len(ids) > len(byRank)/8 {
		// A large share of the catalog: walk the ranks.
		set := newIDSet(len(ranks))
		set.addAll(ids)
		ids = ids[:0]
		for _, id := range byRank {
			if set.has(uint64(id)) {
				ids = append(ids, uint64(id))
			}
		}
		return
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if fresh && len(ids) >= abbrevMin && uint64(c.series.n) <= math.MaxUint32 {
		c.sortAbbrev(ids, -1)
		return
	}
	slices.SortFunc(ids, func(a, b uint64) int {
		if a < n && b < n {
			return cmp.Compare(ranks[a], ranks[b])
		}
		return strings.Compare(c.series.at(a).Key, c.series.at(b).Key)
	})
}

// sortAbbrev sorts ids, all below 2^32, by key. Comparing the keys
// themselves, through the series list, spent most of a flush's sort
// re-reading the long prefix that a burst of new series shares
// ("sensor,device_id=dev-00") and missing the cache on both series of
// every comparison. Instead each key is read once: its next 4 bytes past
// the prefix that all share go into the top half of its id, the ids are
// sorted as integers in place, and each run of ids whose 4 bytes tie is
// sorted the same way past its own longer shared prefix. after is the
// length of a prefix every key is known to share, or -1. The caller
// holds mu for reading.
func (c *Catalog) sortAbbrev(ids []uint64, after int) {
	key := func(id uint64) string { return c.series.at(id).Key }
	if len(ids) < abbrevRunMin {
		from := max(after, 0)
		slices.SortFunc(ids, func(a, b uint64) int { return strings.Compare(key(a)[from:], key(b)[from:]) })
		return
	}
	first := key(ids[0])
	lcp := len(first)
	for _, id := range ids[1:] {
		k := key(id)
		n := min(lcp, len(k))
		j := max(after, 0)
		for j < n && first[j] == k[j] {
			j++
		}
		lcp = j
	}
	if lcp <= after {
		// No longer shared prefix (keys that end early tie with ones
		// that go on with zero bytes): compare the keys.
		slices.SortFunc(ids, func(a, b uint64) int { return strings.Compare(key(a)[lcp:], key(b)[lcp:]) })
		return
	}
	for i, id := range ids {
		var next [4]byte // zero-padded: a key that ends sooner sorts first, or ties
		copy(next[:], key(id)[lcp:])
		ids[i] = uint64(binary.BigEndian.Uint32(next[:]))<<32 | id
	}
	slices.Sort(ids)
	for i := 0; i < len(ids); {
		j := i + 1
		for j < len(ids) && ids[j]>>32 == ids[i]>>32 {
			j++
		}
		for k := i; k < j; k++ {
			ids[k] &= math.MaxUint32
		}
		if j-i > 1 {
			c.sortAbbrev(ids[i:j], lcp)
		}
		i = j
	}
}

// abbrevMin is the fewest ids that SortByKeyRanks sorts with sortAbbrev,
// abbrevRunMin the fewest that sortAbbrev sorts by abbreviation rather
// than by comparing keys.
const (
	abbrevMin    = 1024
	abbrevRunMin = 32
)

// TagValues returns, per measurement (the one named, or every one when it
// is ""), the sorted values of tag key among the series of field (all when
// "") that pass the compiled matchers ms and that keep keeps. keep runs
// without mu.
func (c *Catalog) TagValues(ctx context.Context, measurement, field, key string, ms []Matcher, keep func(ids []uint64) ([]uint64, error)) ([][]string, error) {
	var lists [][]string
	c.mu.RLock()
	mis := c.measIndexes(measurement)
	c.mu.RUnlock()
	hasKey := Matcher{key: key, op: point.MatchNotEqual}
	for _, mi := range mis {
		c.mu.RLock()
		ki := mi.keys[key]
		var ids []uint64
		if ki != nil {
			ms := ms
			if ki.n*4 < len(mi.ids) {
				// Few series hold the key: start from them.
				ms = append(slices.Clip(ms), hasKey)
			}
			ids = c.fieldFilter(mi.selectIDs(ms, c.series.n), field)
		}
		c.mu.RUnlock()
		if len(ids) == 0 {
			continue
		}
		ids, err := keep(ids)
		if err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			continue
		}
		visible := newIDSet(int(ids[len(ids)-1]) + 1) // ids ascending
		visible.addAll(ids)
		sorted := ki.values()
		vals := make([]string, 0, min(len(sorted), len(ids)))
		c.mu.RLock()
		for i, p := range sorted {
			if i%4096 == 0 && ctx.Err() != nil {
				c.mu.RUnlock()
				return nil, ctx.Err()
			}
			if slices.ContainsFunc(p.ids(), visible.has) {
				vals = append(vals, p.value)
			}
		}
		c.mu.RUnlock()
		lists = append(lists, vals)
	}
	return lists, nil
}
