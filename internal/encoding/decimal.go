package encoding

import (
	"fmt"
	"math"
)

// Decimal format, for float blocks whose every value is exactly a decimal
// with at most MaxDecimalScale fractional digits: with k(i) the integer such
// that v(i) == float64(k(i)) / 10^scale exactly (bit for bit),
//
//	+-----------+--------------------------+----------------------------------+
//	| scale (1) | zigzag(k0) uvarint       | packed zigzag(k(i)-k(i-1)), i>=1 |
//	+-----------+--------------------------+----------------------------------+
//
// Decoding computes float64(k)/10^scale; the encoder only chooses this
// format after checking that this expression gives back every value's exact
// bits, so the format is lossless. -0, NaN and infinities are never decimal.

// MaxDecimalScale is the largest number of fractional digits the decimal
// format tries.
const MaxDecimalScale = 6

var pow10 = [MaxDecimalScale + 1]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6}

// maxExact is the bound on scaled integers: below 2^53 every integer is a
// float64, so the round trip is exact in both directions.
const maxExact = 1 << 53

// scaledAt returns k with float64(k)/10^d == v bit for bit, if there is one.
func scaledAt(v float64, d int) (int64, bool) {
	s := v * pow10[d]
	if !(s > -maxExact && s < maxExact) { // also rejects NaN
		return 0, false
	}
	k := int64(math.Round(s))
	return k, math.Float64bits(float64(k)/pow10[d]) == math.Float64bits(v)
}

// DecimalScale returns the smallest scale at which every float bit pattern
// in vals is an exact decimal, or false when there is none up to
// MaxDecimalScale.
func DecimalScale(vals []uint64) (int, bool) {
	d := 0
	for _, b := range vals {
		v := math.Float64frombits(b)
		for {
			if _, ok := scaledAt(v, d); ok {
				break
			}
			d++
			if d > MaxDecimalScale {
				return 0, false
			}
		}
	}
	return d, true
}

// AppendDecimal appends the float bit patterns vals in the decimal format,
// at the smallest scale that fits the values seen so far each time one does
// not fit, and reports true; or it returns dst unchanged and false when vals
// are not all exact decimals.
func AppendDecimal(dst []byte, vals []uint64) ([]byte, bool) {
	if len(vals) == 0 {
		return dst, true
	}
	d := 0
	for {
		out, bad := appendDecimalAt(dst, vals, d)
		if bad < 0 {
			return out, true
		}
		v := math.Float64frombits(vals[bad])
		for d++; d <= MaxDecimalScale; d++ {
			if _, ok := scaledAt(v, d); ok {
				break
			}
		}
		if d > MaxDecimalScale {
			return dst, false
		}
	}
}

// appendDecimalAt encodes vals at scale d. It returns the index of the first
// value that is not exact at d, or -1. The loop over a chunk has no
// data-dependent branch, so the divisions of successive values overlap.
func appendDecimalAt(dst []byte, vals []uint64, d int) ([]byte, int) {
	p := pow10[d]
	k0, ok := scaledAt(math.Float64frombits(vals[0]), d)
	if !ok {
		return dst, 0
	}
	out := append(dst, byte(d))
	out = AppendVarint(out, k0)
	rest := vals[1:]
	if len(rest) == 0 {
		// A block of one sample (a flush at high cardinality holds
		// mostly those) need not zero the chunk buffer below.
		return out, -1
	}
	prev := k0
	var zz [PackedChunk]uint64
	for base := 0; base < len(rest); base += PackedChunk {
		chunk := rest[base:min(base+PackedChunk, len(rest))]
		chunkPrev := prev
		var bad uint64
		inRange := true
		for i, b := range chunk {
			s := math.Float64frombits(b) * p
			inRange = inRange && math.Abs(s) < maxExact
			// Round half away from zero, cheaper than math.Round; where
			// the two differ the exactness check fails and the chunk is
			// redone below with math.Round.
			k := int64(s + math.Copysign(0.5, s))
			bad |= math.Float64bits(float64(k)/p) ^ b
			zz[i] = Zigzag(k - prev)
			prev = k
		}
		if bad != 0 || !inRange {
			// Redo the chunk exactly, finding the first value that is
			// not a decimal at this scale.
			prev = chunkPrev
			for i, b := range chunk {
				k, ok := scaledAt(math.Float64frombits(b), d)
				if !ok {
					return dst, 1 + base + i
				}
				zz[i] = Zigzag(k - prev)
				prev = k
			}
		}
		out = appendChunk(out, zz[:len(chunk)])
	}
	return out, -1
}

// DecodeDecimal appends n float bit patterns decoded from src to dst and
// returns the rest of src.
func DecodeDecimal(dst []uint64, src []byte, n int) ([]uint64, []byte, error) {
	if n <= 0 {
		if n < 0 {
			return dst, nil, fmt.Errorf("%w: negative decimal count", ErrMalformed)
		}
		return dst, src, nil
	}
	if len(src) < 2 {
		return dst, nil, fmt.Errorf("%w: decimal header too short", ErrMalformed)
	}
	d := int(src[0])
	if d > MaxDecimalScale {
		return dst, nil, fmt.Errorf("%w: decimal scale %d", ErrMalformed, d)
	}
	// As DecodeInts, with the conversion folded into the running sum.
	u, src, err := Uvarint(src[1:])
	if err != nil {
		return dst, nil, err
	}
	if packedMinBytes(n-1) > len(src) {
		return dst, nil, fmt.Errorf("%w: %d decimals in %d bytes", ErrMalformed, n, len(src))
	}
	start := len(dst)
	dst = extend(dst, n)
	out := dst[start:]
	rest, err := unpackAll(out[1:], src)
	if err != nil {
		return dst[:start], nil, err
	}
	p := pow10[d]
	k := Unzigzag(u)
	out[0] = math.Float64bits(float64(k) / p)
	for i := 1; i < len(out); i++ {
		k += Unzigzag(out[i])
		out[i] = math.Float64bits(float64(k) / p)
	}
	return dst, rest, nil
}
