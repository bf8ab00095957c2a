// Package xsum is an exact float64 accumulator: the sum does not depend on
// the order values were added or partial sums merged in.
//
// Placeholder for the package of the same API on branch aggs; replaced by
// it when that is merged.
package xsum

import (
	"encoding/binary"
	"errors"
	"math"
)

// Acc is an exact sum of float64 values, kept as non-overlapping partials
// (Shewchuk), plus the plain sum of non-finite values.
type Acc struct {
	parts   []float64
	special float64 // sum of ±Inf and NaN added
	n       uint64
}

// Add adds v exactly.
func (a *Acc) Add(v float64) {
	a.n++
	if math.IsInf(v, 0) || math.IsNaN(v) {
		a.special += v
		return
	}
	x := v
	i := 0
	for _, y := range a.parts {
		if math.Abs(x) < math.Abs(y) {
			x, y = y, x
		}
		hi := x + y
		lo := y - (hi - x)
		if lo != 0 {
			a.parts[i] = lo
			i++
		}
		x = hi
	}
	a.parts = append(a.parts[:i], x)
}

// Merge adds b's exact sum to a.
func (a *Acc) Merge(b *Acc) {
	for _, p := range b.parts {
		a.Add(p)
		a.n--
	}
	a.special += b.special
	a.n += b.n
}

// IsZero reports whether nothing was added.
func (a *Acc) IsZero() bool { return a.n == 0 }

// Float64 returns the sum correctly rounded.
func (a *Acc) Float64() float64 {
	if a.special != 0 || math.IsNaN(a.special) {
		return a.special
	}
	p := a.parts
	n := len(p)
	if n == 0 {
		return 0
	}
	hi := p[n-1]
	lo := 0.0
	n--
	for n > 0 {
		x := hi
		y := p[n-1]
		n--
		hi = x + y
		yr := hi - x
		lo = y - yr
		if lo != 0 {
			break
		}
	}
	if n > 0 && ((lo < 0 && p[n-1] < 0) || (lo > 0 && p[n-1] > 0)) {
		y := lo * 2
		x := hi + y
		yr := x - hi
		if y == yr {
			hi = x
		}
	}
	return hi
}

// AppendBinary appends a's encoding: | n uvarint | special (8) | k uvarint | k partials (8 each) |.
func (a *Acc) AppendBinary(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, a.n)
	dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(a.special))
	dst = binary.AppendUvarint(dst, uint64(len(a.parts)))
	for _, p := range a.parts {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(p))
	}
	return dst
}

var errShort = errors.New("xsum: short encoding")

// DecodeAcc decodes an Acc from the front of b and returns how many bytes
// it took.
func DecodeAcc(b []byte) (Acc, int, error) {
	var a Acc
	n, k := binary.Uvarint(b)
	if k <= 0 || len(b)-k < 8 {
		return a, 0, errShort
	}
	a.n = n
	off := k
	a.special = math.Float64frombits(binary.LittleEndian.Uint64(b[off:]))
	off += 8
	np, k := binary.Uvarint(b[off:])
	if k <= 0 || np > uint64(len(b)-off-k)/8 {
		return Acc{}, 0, errShort
	}
	off += k
	if np > 0 {
		a.parts = make([]float64, np)
		for i := range a.parts {
			a.parts[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[off:]))
			off += 8
		}
	}
	return a, off, nil
}
