package catalog

import (
	"math/rand/v2"
	"testing"
)

// refTable against a map of what was inserted: hashes drawn from a few
// distinct tags (so that many entries share a tag and a probe run) and
// from random ones, through several growths; every entry is found by
// walking its tag's references, in any order, and no other.
func TestRefTable(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, reserve := range []int{0, 5000} {
		var tb refTable
		tb.reserve(reserve)
		want := map[uint64][]uint32{} // hash -> refs
		var hashes []uint64
		for ref := uint32(1); ref <= 5000; ref++ {
			var h uint64
			switch r.IntN(4) {
			case 0: // the same tag as an earlier hash, another slot part
				if len(hashes) > 0 {
					h = hashes[r.IntN(len(hashes))]&^(1<<32-1) | uint64(r.Uint32())
					break
				}
				fallthrough
			case 1: // exactly an earlier hash (a collision)
				if len(hashes) > 0 {
					h = hashes[r.IntN(len(hashes))]
					break
				}
				fallthrough
			default:
				h = r.Uint64()
			}
			tb.insert(h, ref)
			want[h] = append(want[h], ref)
			hashes = append(hashes, h)
			if ref%997 == 0 || ref == 5000 {
				check(t, &tb, want)
			}
		}
		if tb.len() != 5000 || len(tb.slots) < 5000*4/3 || len(tb.slots)&(len(tb.slots)-1) != 0 {
			t.Fatalf("%d entries in %d slots", tb.len(), len(tb.slots))
		}
	}
	var empty refTable
	if r, _ := empty.first(42); r != 0 {
		t.Fatalf("empty table found %d", r)
	}
}

// check finds every ref of want under its hash: the refs walked for a
// hash are those of every hash with its tag, a superset.
func check(t *testing.T, tb *refTable, want map[uint64][]uint32) {
	t.Helper()
	byTag := map[uint64]map[uint32]bool{}
	for h, refs := range want {
		m := byTag[h>>32]
		if m == nil {
			m = map[uint32]bool{}
			byTag[h>>32] = m
		}
		for _, r := range refs {
			m[r] = true
		}
	}
	for h := range want {
		got := map[uint32]bool{}
		for r, i := tb.first(h); r != 0; r, i = tb.next(h, i) {
			if got[r] {
				t.Fatalf("hash %x: ref %d walked twice", h, r)
			}
			got[r] = true
		}
		if exp := byTag[h>>32]; len(got) != len(exp) {
			t.Fatalf("hash %x: walked %d refs, want %d", h, len(got), len(exp))
		}
		for r := range got {
			if !byTag[h>>32][r] {
				t.Fatalf("hash %x: walked ref %d of another tag", h, r)
			}
		}
	}
}
