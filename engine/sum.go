package engine

import (
	"math"
	"math/bits"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/segment"
)

// int128 is a two's complement 128-bit integer: the exact sum of int64 or
// uint64 samples. 2^64 samples of any value cannot overflow it, so integer
// sums and means are exact whatever the order of addition, and the same
// from every source (memtable, segment blocks or block stats).
type int128 struct {
	hi int64
	lo uint64
}

func (x *int128) addInt(v int64) {
	var c uint64
	x.lo, c = bits.Add64(x.lo, uint64(v), 0)
	x.hi += int64(c) + v>>63 // v>>63 sign-extends v into the high word
}

func (x *int128) addUint(v uint64) {
	var c uint64
	x.lo, c = bits.Add64(x.lo, v, 0)
	x.hi += int64(c)
}

func (x *int128) add(y int128) {
	var c uint64
	x.lo, c = bits.Add64(x.lo, y.lo, 0)
	x.hi += y.hi + int64(c)
}

func (x int128) neg() int128 {
	lo, b := bits.Sub64(0, x.lo, 0)
	return int128{hi: -x.hi - int64(b), lo: lo}
}

// mulUint returns n*v.
func mulUint(n, v uint64) int128 {
	hi, lo := bits.Mul64(n, v)
	return int128{hi: int64(hi), lo: lo}
}

// mulInt returns n*v.
func mulInt(n uint64, v int64) int128 {
	if v >= 0 {
		return mulUint(n, uint64(v))
	}
	return mulUint(n, uint64(-v)).neg() // -MinInt64 wraps to 1<<63, its magnitude
}

// float64 returns x correctly rounded to a float64.
func (x int128) float64() float64 {
	if x.hi < 0 {
		return -x.neg().float64() // the magnitude of -2^127 is read unsigned below
	}
	hi := uint64(x.hi)
	if hi == 0 {
		return float64(x.lo)
	}
	// Keep the top 64 bits; a set bit below them only breaks a tie, so
	// fold it into the lowest kept bit (which float64 drops anyway).
	s := uint(64 - bits.LeadingZeros64(hi))
	m := hi<<(64-s) | x.lo>>s
	if x.lo<<(64-s) != 0 {
		m |= 1
	}
	return math.Ldexp(float64(m), int(s))
}

// saturateInt returns x clamped to [math.MinInt64, math.MaxInt64].
func (x int128) saturateInt() int64 {
	switch {
	case x.hi == 0 && x.lo <= math.MaxInt64, x.hi == -1 && x.lo > math.MaxInt64:
		return int64(x.lo)
	case x.hi < 0:
		return math.MinInt64
	}
	return math.MaxInt64
}

// saturateUint returns x clamped to [0, math.MaxUint64].
func (x int128) saturateUint() uint64 {
	switch {
	case x.hi == 0:
		return x.lo
	case x.hi < 0:
		return 0
	}
	return math.MaxUint64
}

// blockSum recovers the exact sum of an int or uint block from its stats.
// Segments store integer block sums wrapped to 64 bits; the exact sum lies
// in [n*Min, n*Max], so when that interval is narrower than 2^64 only one
// value in it has the stored low 64 bits. ok is false when the interval is
// wider: the caller then decodes the block.
func blockSum(kind point.Kind, b *segment.BlockMeta) (sum int128, ok bool) {
	n := uint64(b.Count)
	var lo int128
	var span uint64
	switch kind {
	case point.KindInt:
		lo = mulInt(n, b.Min.Int())
		span = uint64(b.Max.Int()) - uint64(b.Min.Int()) // Max >= Min, so this is Max-Min
		if b.Max.Int() < b.Min.Int() {
			return int128{}, false
		}
	case point.KindUint:
		lo = mulUint(n, b.Min.Uint())
		span = b.Max.Uint() - b.Min.Uint()
		if b.Max.Uint() < b.Min.Uint() {
			return int128{}, false
		}
	default:
		return int128{}, false
	}
	if hi, _ := bits.Mul64(n, span); hi != 0 {
		return int128{}, false
	}
	lo.addUint(b.Sum.Bits() - lo.lo) // the distance above n*Min, mod 2^64
	return lo, true
}
