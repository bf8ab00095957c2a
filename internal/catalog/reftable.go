package catalog

import "math/bits"

// refTable is a hash table from 64-bit hashes to 32-bit references (an
// item's index in its slab directory, plus one): open addressing with
// linear probing, one 8-byte slot an entry, holding the reference and the
// top 32 bits of its hash. The catalog keeps its tag sets and its
// postings in two kinds of these instead of maps of pointers. At a million
// series, a map[uint64]*T held 30-38 bytes an entry plus a chain pointer
// in each item; a table holds 10.7-21 bytes an entry and no pointer the
// garbage collector must follow.
//
// An entry's slot is chosen by the top bits of its hash alone, which the
// slot keeps, so that growing the table never reads an item: that is why
// a table holds at most 2^32 slots (the catalog's ids are 32-bit anyway).
// Callers confirm a hit by comparing the item (equal hashes are not equal
// items). There is no delete: the catalog never removes series.
type refTable struct {
	slots []uint64 // len a power of two, or 0; a slot is tag<<32 | ref, 0 when empty
	shift uint     // 64 - log2(len(slots))
	n     int
}

// refTableMin is the smallest table, in slots.
const refTableMin = 8

// slotOf is where the probe for hash h starts.
func (t *refTable) slotOf(h uint64) uint64 { return h >> t.shift }

// first returns the first reference whose hash has h's tag, and the slot
// it was found in (to resume the probe from with next), or ref 0 when
// there is none.
func (t *refTable) first(h uint64) (ref uint32, slot uint64) {
	if len(t.slots) == 0 {
		return 0, 0
	}
	return t.probe(h, t.slotOf(h))
}

// next returns the next reference whose hash has h's tag after the one
// found in slot, or ref 0 when there is none.
func (t *refTable) next(h uint64, slot uint64) (ref uint32, at uint64) {
	return t.probe(h, (slot+1)&uint64(len(t.slots)-1))
}

func (t *refTable) probe(h uint64, i uint64) (uint32, uint64) {
	tag := h >> 32
	mask := uint64(len(t.slots) - 1)
	for {
		s := t.slots[i]
		if s == 0 {
			return 0, i
		}
		if s>>32 == tag {
			return uint32(s), i
		}
		i = (i + 1) & mask
	}
}

// insert adds ref under hash h; the caller has checked that no equal item
// is there. ref is never 0.
func (t *refTable) insert(h uint64, ref uint32) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(max(2*len(t.slots), refTableMin))
	}
	t.place(h>>32<<32 | uint64(ref))
	t.n++
}

// place puts slot value s in the first empty slot of its probe.
func (t *refTable) place(s uint64) {
	mask := uint64(len(t.slots) - 1)
	i := s >> 32 >> (t.shift - 32)
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = s
}

// reserve sizes the table for n entries in all, so that loading a known
// number of items does not grow it step by step.
func (t *refTable) reserve(n int) {
	want := refTableMin
	for want*3 < n*4 {
		want *= 2
	}
	if want > len(t.slots) {
		t.resize(want)
	}
}

// resize moves the entries to a table of size slots (a power of two, at
// most 2^32).
func (t *refTable) resize(size int) {
	if uint64(size) > 1<<32 {
		// 3 billion entries: far beyond any catalog that fits in memory.
		panic("catalog: hash table past 2^32 slots")
	}
	old := t.slots
	t.slots = make([]uint64, size)
	t.shift = uint(64 - bits.TrailingZeros(uint(size)))
	for _, s := range old {
		if s != 0 {
			t.place(s)
		}
	}
}

// len returns the number of entries.
func (t *refTable) len() int { return t.n }
