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
		if got := x.float64(); got != wantF {
			t.Fatalf("float64(%v) = %v, want %v", want, got, wantF)
		}
		switch {
		case want.IsInt64():
			if x.saturateInt() != want.Int64() {
				t.Fatalf("saturateInt(%v) = %d", want, x.saturateInt())
			}
		case want.Sign() > 0:
			if x.saturateInt() != math.MaxInt64 {
				t.Fatalf("saturateInt(%v) = %d", want, x.saturateInt())
			}
		default:
			if x.saturateInt() != math.MinInt64 {
				t.Fatalf("saturateInt(%v) = %d", want, x.saturateInt())
			}
		}
	}
}

// TestBlockSumRecoversExactSum checks that blockSum either declines or
// returns the exact sum of values whose stats hold a wrapped sum.
func TestBlockSumRecoversExactSum(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	declined, rounds := 0, 3000
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
		// Values around one random center, or anywhere.
		var ints []int64
		var uints []uint64
		center, spread := extremeInt(r), uint64(1)<<r.IntN(64)
		for range n {
			d := r.Uint64N(spread)
			if kind == point.KindInt {
				ints = append(ints, int64(uint64(center)+d))
			} else {
				uints = append(uints, uint64(center)+d)
			}
		}
		bm := segment.BlockMeta{Count: n}
		want := new(big.Int)
		if kind == point.KindInt {
			mn, mx, s := ints[0], ints[0], int64(0)
			for _, v := range ints {
				mn, mx, s = min(mn, v), max(mx, v), s+v
				want.Add(want, big.NewInt(v))
			}
			bm.Min, bm.Max, bm.Sum = point.Int(mn), point.Int(mx), point.Int(s)
		} else {
			mn, mx, s := uints[0], uints[0], uint64(0)
			for _, v := range uints {
				mn, mx, s = min(mn, v), max(mx, v), s+v
				want.Add(want, new(big.Int).SetUint64(v))
			}
			bm.Min, bm.Max, bm.Sum = point.Uint(mn), point.Uint(mx), point.Uint(s)
		}
		got, ok := blockSum(kind, &bm)
		if !ok {
			declined++
			continue
		}
		if got.big().Cmp(want) != 0 {
			t.Fatalf("blockSum(%v, n=%d) = %v, want %v", kind, n, got.big(), want)
		}
	}
	if declined == rounds {
		t.Fatal("blockSum never recovered a sum")
	}
}
