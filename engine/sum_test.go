package engine

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/segment"
)

func (x int128) big() *big.Int {
	v := new(big.Int).SetInt64(x.hi)
	v.Lsh(v, 64)
	return v.Add(v, new(big.Int).SetUint64(x.lo))
}

// extremeInt returns int64 values biased to the edges of the range.
func extremeInt(r *rand.Rand) int64 {
	switch r.IntN(6) {
	case 0:
		return math.MaxInt64 - r.Int64N(3)
	case 1:
		return math.MinInt64 + r.Int64N(3)
	case 2:
		return 1_700_000_000_000_000_000 + r.Int64N(1e15)
	case 3:
		return r.Int64N(2000) - 1000
	}
	return int64(r.Uint64())
}

func extremeUint(r *rand.Rand) uint64 {
	switch r.IntN(5) {
	case 0:
		return math.MaxUint64 - r.Uint64N(3)
	case 1:
		return r.Uint64N(3)
	case 2:
		return 1_700_000_000_000_000_000 + r.Uint64N(1e15)
	}
	return r.Uint64()
}

func TestInt128AgainstBig(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		var x int128
		want := new(big.Int)
		for range r.IntN(50) + 1 {
			if r.IntN(2) == 0 {
				v := extremeInt(r)
				x.addInt(v)
				want.Add(want, big.NewInt(v))
			} else {
				v := extremeUint(r)
				x.addUint(v)
				want.Add(want, new(big.Int).SetUint64(v))
			}
		}
		if x.big().Cmp(want) != 0 {
			t.Fatalf("sum = %v, want %v", x.big(), want)
		}
		wantF, _ := new(big.Float).SetInt(want).Float64()
		if got := x.float(); math.Abs(got-wantF) > math.Abs(wantF)*0x1p-52 {
			t.Fatalf("float(%v) = %v, want %v", want, got, wantF)
		}
		switch {
		case want.IsInt64():
			if x.int64() != want.Int64() {
				t.Fatalf("saturateInt(%v) = %d", want, x.int64())
			}
		case want.Sign() > 0:
			if x.int64() != math.MaxInt64 {
				t.Fatalf("saturateInt(%v) = %d", want, x.int64())
			}
		default:
			if x.int64() != math.MinInt64 {
				t.Fatalf("saturateInt(%v) = %d", want, x.int64())
			}
		}
	}
}

// TestBlockSumExact checks that blockSumExact never vouches for a stored
// (wrapped) block sum that is not the exact sum.
func TestBlockSumExact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	vouched, rounds := 0, 3000
	if raceEnabled {
		rounds = 600
	}
	for i := range rounds {
		n := 1 + r.IntN(64)
		if i%200 == 0 {
			n = segment.MaxBlockSamples
		}
		kind := point.KindInt
		if i%2 == 1 {
			kind = point.KindUint
		}
		center, spread := extremeInt(r), uint64(1)<<r.IntN(64)
		if i%3 == 0 {
			center = r.Int64N(1000)
		}
		bm := segment.BlockMeta{Count: n}
		want := new(big.Int)
		var stored *big.Int
		if kind == point.KindInt {
			var mn, mx, s int64
			for j := range n {
				v := int64(uint64(center) + r.Uint64N(spread))
				if j == 0 {
					mn, mx = v, v
				}
				mn, mx, s = min(mn, v), max(mx, v), s+v
				want.Add(want, big.NewInt(v))
			}
			bm.Min, bm.Max, bm.Sum = point.Int(mn), point.Int(mx), point.Int(s)
			stored = big.NewInt(s)
		} else {
			var mn, mx, s uint64
			for j := range n {
				v := uint64(center) + r.Uint64N(spread)
				if j == 0 {
					mn, mx = v, v
				}
				mn, mx, s = min(mn, v), max(mx, v), s+v
				want.Add(want, new(big.Int).SetUint64(v))
			}
			bm.Min, bm.Max, bm.Sum = point.Uint(mn), point.Uint(mx), point.Uint(s)
			stored = new(big.Int).SetUint64(s)
		}
		if !blockSumExact(&bm, kind) {
			continue
		}
		vouched++
		if stored.Cmp(want) != 0 {
			t.Fatalf("blockSumExact vouched for %v (n=%d), exact sum %v", stored, n, want)
		}
	}
	if vouched == 0 {
		t.Fatal("blockSumExact never vouched for a sum")
	}
}
