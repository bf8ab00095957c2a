// Package xsum sums float64 values exactly: the result of an Acc is the
// exact sum of every value added, rounded once (to nearest, ties to even)
// to a float64, so it depends neither on the order of the values nor on
// how they were split into partial sums and merged. Block statistics that
// store a partial sum (AppendBinary) give the same answer, bit for bit, as
// adding the samples one by one.
//
// An Acc is a fixed-point superaccumulator: the value is held as signed
// 32-bit digits (limbs, one int64 each) in units of 2^-1074, the smallest
// subnormal, covering every finite float64 (2^-1074 .. 2^1024) plus one
// limb of carry headroom. Add splits the 53-bit significand of a value
// over three limbs without carrying; carries are propagated lazily, at
// most every 2^30 additions, and in Float64 and AppendBinary. It is exact
// for fewer than 2^60 addends.
//
// NaN and ±Inf inputs are tracked apart from the finite sum: a NaN, or
// +Inf together with -Inf, makes the result NaN; otherwise an infinite
// input makes it that infinity. A finite sum whose correctly rounded value
// lies beyond the float64 range is ±Inf, as IEEE 754 rounding says.
//
// # Encoding
//
// AppendBinary writes the value as sign and magnitude, keeping only the
// magnitude's nonzero byte range, so a typical block sum takes 10-14
// bytes:
//
//	+-----------+---------+--------------+--------------+------------------------+
//	| version 1 | flags 1 | off uvarint  | n uvarint    | magnitude (n bytes LE) |
//	+-----------+---------+--------------+--------------+------------------------+
//
//	version    encVersion (1)
//	flags      bit 0 negative, bit 1 NaN seen, bit 2 +Inf seen, bit 3 -Inf
//	           seen; other bits zero
//	off        the magnitude's lowest byte is worth 2^(8*off-1074)
//	n          magnitude bytes; 0 for a zero finite sum (then off is 0 and
//	           the negative bit clear); otherwise the first and the last
//	           byte are nonzero and off+n <= maxMagBytes
//
// The encoding is canonical: equal states encode to equal bytes, and
// DecodeAcc rejects any other spelling. It carries no checksum of its own:
// it is embedded in checksummed records (a segment's index section). These constants are part of the
// durable format (segment block stats) and must not be changed.
package xsum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

const (
	encVersion = 1

	flagNeg    = 1 << 0
	flagNaN    = 1 << 1
	flagPosInf = 1 << 2
	flagNegInf = 1 << 3
	flagsAll   = flagNeg | flagNaN | flagPosInf | flagNegInf

	// nLimbs limbs of digitBits: 66 hold bits 0..2111 of the value in
	// units of 2^-1074 (a finite float64 needs bits 0..2098), the last one
	// takes carries beyond.
	digitBits  = 32
	digitMask  = 1<<digitBits - 1
	nLimbs     = 67
	topLimb    = nLimbs - 1
	digitBytes = digitBits / 8

	// maxMagBytes bounds an encoded magnitude: the 66 digits and at most
	// 5 bytes (40 bits) of the carry limb.
	maxMagBytes = topLimb*digitBytes + 5
	maxTop      = 1<<40 - 1

	// normEvery additions or merges between carry propagations keep every
	// limb within ±(normEvery+2)*2^32 < 2^63.
	normEvery = 1 << 30
)

// ErrFormat is returned (wrapped) by DecodeAcc for bytes that are no
// valid encoding.
var ErrFormat = errors.New("xsum: bad encoding")

// Acc is an exact sum of float64 values. The zero value is an empty sum
// (whose Float64 is 0). An Acc is a plain value: copying it copies the
// sum. Methods that only read it (Float64, IsZero, AppendBinary) may be
// called concurrently.
type Acc struct {
	limb [nLimbs]int64
	// lo and hi bound the limbs that may be nonzero: [lo, hi); hi == 0
	// when none may be.
	lo, hi  int32
	pending int32 // additions and merges since carries were propagated
	special uint8 // flagNaN | flagPosInf | flagNegInf
}

// Add adds x to the sum.
func (a *Acc) Add(x float64) {
	b := math.Float64bits(x)
	e := uint(b>>52) & 0x7ff
	m := b & (1<<52 - 1)
	switch e {
	case 0x7ff:
		a.addSpecial(b)
		return
	case 0:
		if m == 0 {
			return // ±0
		}
		e = 1 // subnormal: m * 2^-1074
	default:
		m |= 1 << 52
	}
	// x = ±m * 2^(e-1075): bit 0 of m sits at bit e-1 of the accumulator.
	p := e - 1
	i := int32(p / digitBits)
	s := p % digitBits
	d0 := int64((m << s) & digitMask)
	r := m >> (digitBits - s)
	d1 := int64(r & digitMask)
	d2 := int64(r >> digitBits)
	neg := -int64(b >> 63) // 0 or -1
	l := (*[3]int64)(a.limb[i : i+3])
	l[0] += (d0 ^ neg) - neg
	l[1] += (d1 ^ neg) - neg
	l[2] += (d2 ^ neg) - neg
	switch {
	case a.hi == 0:
		a.lo, a.hi = i, i+3
	case i < a.lo:
		a.lo = i
		fallthrough
	case i+3 > a.hi:
		a.hi = max(a.hi, i+3)
	}
	a.pending++
	if a.pending >= normEvery {
		a.normalize()
	}
}

// AddBits adds the float64 values whose IEEE-754 bit patterns are bs, as
// Add does one by one, faster: values whose exponents lie within a span of
// fastSpan (a run of sensor readings) are summed in a 128-bit register and
// deposited at once.
func (a *Acc) AddBits(bs []uint64) {
	for len(bs) > 0 {
		chunk := bs[:min(len(bs), fastChunk)]
		bs = bs[len(chunk):]
		if !a.addNarrow(chunk) {
			a.addWide(chunk)
		}
	}
}

const (
	// fastSpan is the widest exponent span addNarrow takes: a shifted
	// significand stays below 2^63.
	fastSpan = 63 - 53
	// fastChunk values of < 2^63 each sum to < 2^(63+fastChunkBits) in
	// 128 bits, and a chunk counts as few pending additions.
	fastChunk = 1 << 16
	// fastMaxExp keeps a deposit of 5 limbs below the carry limb.
	fastMaxExp = 1900
)

// narrowSum sums bs (at most fastChunk values) exactly when their biased
// exponents lie within fastSpan of each other and none is NaN or
// infinite: the sum is the signed 128-bit hi:lo times 2^(emin-1) in units
// of 2^-1074. ok is false when it cannot.
func narrowSum(bs []uint64) (hi int64, lo uint64, emin uint, ok bool) {
	emin, emax := uint(0x7ff), uint(0)
	for _, b := range bs {
		e := max(uint(b>>52)&0x7ff, 1) // subnormals share exponent 1
		emin, emax = min(emin, e), max(emax, e)
	}
	if emax-emin > fastSpan || emax > fastMaxExp {
		return 0, 0, 0, false // also when a NaN or an infinity (0x7ff) is present, or bs is empty
	}
	for _, b := range bs {
		e := uint(b>>52) & 0x7ff
		m := b & (1<<52 - 1)
		if e == 0 {
			e = 1
		} else {
			m |= 1 << 52
		}
		x := int64(m << (e - emin))
		neg := -int64(b >> 63)
		x = (x ^ neg) - neg
		var c uint64
		lo, c = bits.Add64(lo, uint64(x), 0)
		hi += x>>63 + int64(c)
	}
	return hi, lo, emin, true
}

// AppendSum appends the encoding of the exact sum of the float64 values
// whose IEEE-754 bit patterns are bs: the bytes that AddBits on an empty
// Acc and then AppendBinary append. When the values' exponents lie within
// fastSpan of each other (a block of sensor readings) it encodes their
// 128-bit sum directly, building no Acc.
func AppendSum(dst []byte, bs []uint64) []byte {
	if len(bs) <= fastChunk {
		if hi, lo, emin, ok := narrowSum(bs); ok {
			return appendNarrow(dst, hi, lo, emin-1)
		}
	}
	var a Acc
	a.AddBits(bs)
	return a.AppendBinary(dst)
}

// appendNarrow appends the encoding of hi:lo * 2^p in units of 2^-1074,
// hi:lo a signed 128-bit integer below 2^(63+fastChunkBits) in magnitude
// and p at most fastMaxExp: no NaN or infinity, and far below the carry
// limb, so the encoding is the sign and the nonzero bytes of the
// magnitude, as AppendBinary writes them.
func appendNarrow(dst []byte, hi int64, lo uint64, p uint) []byte {
	if hi == 0 && lo == 0 {
		return append(dst, encVersion, 0, 0, 0)
	}
	var flags byte
	mhi, mlo := uint64(hi), lo
	if hi < 0 {
		flags = flagNeg
		var b uint64
		mlo, b = bits.Sub64(0, mlo, 0)
		mhi, _ = bits.Sub64(0, mhi, b)
	}
	// Byte k of the magnitude is worth 2^(8k-1074): shift it by p's bits
	// within a byte (it stays below 2^128) and start at byte p/8.
	s := p % 8
	if s > 0 {
		mhi = mhi<<s | mlo>>(64-s)
		mlo <<= s
	}
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[:8], mlo)
	binary.LittleEndian.PutUint64(buf[8:], mhi)
	first, end := 0, len(buf)
	for buf[first] == 0 {
		first++
	}
	for buf[end-1] == 0 {
		end--
	}
	dst = append(dst, encVersion, flags)
	dst = binary.AppendUvarint(dst, uint64(int(p/8)+first))
	dst = binary.AppendUvarint(dst, uint64(end-first))
	return append(dst, buf[first:end]...)
}

// addNarrow adds bs when their biased exponents lie within fastSpan of
// each other and none is NaN or infinite, reporting whether it did.
func (a *Acc) addNarrow(bs []uint64) bool {
	hi, lo, emin, ok := narrowSum(bs)
	if !ok {
		return false
	}
	// The sum is hi:lo * 2^(emin-1) in units of 2^-1074: deposit its four
	// 32-bit digits (the top one signed), shifted into place.
	p := emin - 1
	i := int32(p / digitBits)
	s := p % digitBits
	digits := [4]int64{int64(lo & digitMask), int64(lo >> digitBits), int64(uint64(hi) & digitMask), hi >> digitBits}
	l := (*[5]int64)(a.limb[i : i+5])
	for k, d := range digits {
		v := d << s // |v| < 2^63
		l[k] += v & digitMask
		l[k+1] += v >> digitBits
	}
	if a.hi == 0 {
		a.lo, a.hi = i, i+5
	} else {
		a.lo, a.hi = min(a.lo, i), max(a.hi, i+5)
	}
	a.pending += 2
	if a.pending >= normEvery/2 {
		a.normalize()
	}
	return true
}

// addWide adds bs one by one, as Add does.
func (a *Acc) addWide(bs []uint64) {
	lo, hi := int32(nLimbs), int32(0)
	for _, b := range bs {
		e := uint(b>>52) & 0x7ff
		m := b & (1<<52 - 1)
		switch e {
		case 0x7ff:
			a.addSpecial(b)
			continue
		case 0:
			if m == 0 {
				continue
			}
			e = 1
		default:
			m |= 1 << 52
		}
		p := e - 1
		i := int32(p / digitBits)
		s := p % digitBits
		d0 := int64((m << s) & digitMask)
		r := m >> (digitBits - s)
		d1 := int64(r & digitMask)
		d2 := int64(r >> digitBits)
		neg := -int64(b >> 63)
		l := (*[3]int64)(a.limb[i : i+3])
		l[0] += (d0 ^ neg) - neg
		l[1] += (d1 ^ neg) - neg
		l[2] += (d2 ^ neg) - neg
		lo, hi = min(lo, i), max(hi, i+3)
	}
	if hi > 0 {
		if a.hi == 0 {
			a.lo, a.hi = lo, hi
		} else {
			a.lo, a.hi = min(a.lo, lo), max(a.hi, hi)
		}
	}
	a.pending += int32(len(bs))
	if a.pending >= normEvery/2 {
		a.normalize()
	}
}

func (a *Acc) addSpecial(b uint64) {
	switch {
	case b&(1<<52-1) != 0:
		a.special |= flagNaN
	case b>>63 != 0:
		a.special |= flagNegInf
	default:
		a.special |= flagPosInf
	}
}

// Merge adds the sum held by b to a.
func (a *Acc) Merge(b *Acc) {
	a.special |= b.special
	if b.hi == 0 {
		return
	}
	if a.pending+b.pending+1 >= normEvery {
		a.normalize()
	}
	lo, hi := b.lo, b.hi
	al := a.limb[lo:hi:hi]
	for i, v := range b.limb[lo:hi:hi] {
		al[i] += v
	}
	if a.hi == 0 {
		a.lo, a.hi = lo, hi
	} else {
		a.lo, a.hi = min(a.lo, lo), max(a.hi, hi)
	}
	a.pending += b.pending + 1
	if a.pending >= normEvery {
		a.normalize()
	}
}

// normalize propagates carries, leaving balanced digits in [-2^31, 2^31)
// below the top limb, and tightens [lo, hi).
func (a *Acc) normalize() {
	a.pending = 0
	if a.hi == 0 {
		return
	}
	var c int64
	i := a.lo
	for ; i < topLimb; i++ {
		if i >= a.hi && c == 0 {
			break
		}
		v := a.limb[i] + c
		c = (v + 1<<(digitBits-1)) >> digitBits
		a.limb[i] = v - c<<digitBits
	}
	if i == topLimb {
		a.limb[topLimb] += c
		i = nLimbs
	}
	a.hi = max(a.hi, i)
	a.trim()
}

// trim narrows [lo, hi) to the nonzero limbs.
func (a *Acc) trim() {
	for a.lo < a.hi && a.limb[a.lo] == 0 {
		a.lo++
	}
	for a.hi > a.lo && a.limb[a.hi-1] == 0 {
		a.hi--
	}
	if a.lo == a.hi {
		a.lo, a.hi = 0, 0
	}
}

// magnitude writes |a|'s digits into d: each in [0, 2^32) below the top
// limb, the top limb >= 0. It returns whether a is negative and the range
// of d's nonzero limbs (lo == hi when a's finite sum is zero).
func (a *Acc) magnitude(d *[nLimbs]int64) (neg bool, lo, hi int) {
	if a.hi == 0 {
		return false, 0, 0
	}
	lo = int(a.lo)
	copy(d[lo:a.hi], a.limb[lo:a.hi])
	hi = carry(d, lo, int(a.hi))
	if d[topLimb] < 0 {
		neg = true
		for i := lo; i < nLimbs; i++ {
			d[i] = -d[i]
		}
		hi = carry(d, lo, nLimbs)
	}
	for lo < hi && d[lo] == 0 {
		lo++
	}
	for hi > lo && d[hi-1] == 0 {
		hi--
	}
	return neg, lo, hi
}

// carry propagates carries in d from limb lo up, leaving digits in
// [0, 2^32) below the top limb, d's limbs from hi up being zero on entry;
// it returns the new bound of possibly nonzero limbs.
func carry(d *[nLimbs]int64, lo, hi int) int {
	var c int64
	i := lo
	for ; i < topLimb; i++ {
		if i >= hi && c == 0 {
			return i
		}
		v := d[i] + c
		c = v >> digitBits
		d[i] = v & digitMask
	}
	d[topLimb] += c
	return nLimbs
}

// IsZero reports whether the sum is exactly zero with no NaN or infinity
// added: the empty sum, or values that cancel exactly.
func (a *Acc) IsZero() bool {
	if a.special != 0 {
		return false
	}
	if a.hi == 0 {
		return true
	}
	var d [nLimbs]int64
	_, lo, hi := a.magnitude(&d)
	return lo == hi
}

// Float64 returns the exact sum rounded to the nearest float64, ties to
// even: ±Inf when that lies beyond the float64 range, NaN when a NaN or
// both infinities were added. An exactly zero sum is +0.
func (a *Acc) Float64() float64 {
	if a.special != 0 {
		switch {
		case a.special&flagNaN != 0, a.special&(flagPosInf|flagNegInf) == flagPosInf|flagNegInf:
			return math.NaN()
		case a.special&flagPosInf != 0:
			return math.Inf(1)
		}
		return math.Inf(-1)
	}
	if a.hi == 0 {
		return 0
	}
	var d [nLimbs]int64
	neg, lo, hi := a.magnitude(&d)
	if lo == hi {
		return 0
	}
	f := math.Float64frombits(roundBits(&d, hi-1))
	if neg {
		return -f
	}
	return f
}

// roundBits returns the float64 bits (sign clear) of the magnitude held in
// d's digits, d[h] being the highest nonzero one.
func roundBits(d *[nLimbs]int64, h int) uint64 {
	if h >= topLimb {
		return 0x7ff << 52 // >= 2^(66*32-1074) = 2^1038
	}
	dig := func(i int) uint64 {
		if i < 0 {
			return 0
		}
		return uint64(d[i])
	}
	// The 128-bit window W of digits h..h-3 is worth W * 2^(32*(h-3)).
	whi := dig(h)<<digitBits | dig(h-1)
	wlo := dig(h-2)<<digitBits | dig(h-3)
	sticky := false
	for i := h - 4; i >= 0; i-- {
		if d[i] != 0 {
			sticky = true
			break
		}
	}
	lw := 96 + bits.Len64(dig(h)) // bit length of W
	l := lw + digitBits*(h-3)     // bit length of the magnitude N
	if l <= 53 {
		// Exact: N < 2^53 is its own bit pattern (subnormal below 2^52).
		return whi >> uint(digitBits*(3-h)-64)
	}
	sh := uint(lw - 53) // 44..75: W >> sh is N's top 53 bits
	var q uint64
	if sh < 64 {
		q = whi<<(64-sh) | wlo>>sh
	} else {
		q = whi >> (sh - 64)
	}
	// The round bit is bit sh-1 of W; below it, the sticky bits.
	var round bool
	if rb := sh - 1; rb < 64 {
		round = wlo>>rb&1 != 0
		sticky = sticky || wlo&(1<<rb-1) != 0
	} else {
		round = whi>>(rb-64)&1 != 0
		sticky = sticky || wlo != 0 || whi&(1<<(rb-64)-1) != 0
	}
	if round && (sticky || q&1 != 0) {
		q++ // may carry into the exponent, as the bit layout wants
	}
	// N ~ q * 2^(l-53) in units of 2^-1074: biased exponent l-52 with the
	// leading significand bit (bit 52 of q) adding one more.
	r := uint64(l-53)<<52 + q
	if r >= 0x7ff<<52 {
		return 0x7ff << 52
	}
	return r
}

// AppendBinary appends the sum's encoding (see the package comment) to
// dst and returns the extended slice.
func (a *Acc) AppendBinary(dst []byte) []byte {
	var d [nLimbs]int64
	neg, lo, hi := a.magnitude(&d)
	flags := a.special
	if lo == hi {
		return append(dst, encVersion, flags, 0, 0)
	}
	if neg {
		flags |= flagNeg
	}
	if d[topLimb] > maxTop {
		d[topLimb] = maxTop // a sum beyond 2^1078: ±Inf either way
	}
	var buf [maxMagBytes + digitBytes*2]byte
	for i := lo; i < hi; i++ {
		if i == topLimb {
			binary.LittleEndian.PutUint64(buf[i*digitBytes:], uint64(d[i]))
		} else {
			binary.LittleEndian.PutUint32(buf[i*digitBytes:], uint32(d[i]))
		}
	}
	first, end := lo*digitBytes, hi*digitBytes
	if hi == nLimbs {
		end = maxMagBytes
	}
	for buf[first] == 0 {
		first++
	}
	for buf[end-1] == 0 {
		end--
	}
	dst = append(dst, encVersion, flags)
	dst = binary.AppendUvarint(dst, uint64(first))
	dst = binary.AppendUvarint(dst, uint64(end-first))
	return append(dst, buf[first:end]...)
}

// DecodeAcc decodes an Acc written by AppendBinary from the start of src
// and returns it with the number of bytes it took. It reads nothing past
// the encoding's own bounds and rejects any non-canonical spelling.
func DecodeAcc(src []byte) (Acc, int, error) {
	var a Acc
	n, err := a.decode(src)
	return a, n, err
}

func (a *Acc) decode(src []byte) (int, error) {
	flags, off, mag, end, err := parse(src)
	if err != nil {
		return 0, err
	}
	a.special = flags &^ flagNeg
	if len(mag) == 0 {
		return end, nil
	}
	for j, c := range mag {
		p := off + j
		if p < topLimb*digitBytes {
			a.limb[p/digitBytes] |= int64(c) << (8 * (p % digitBytes))
		} else {
			a.limb[topLimb] |= int64(c) << (8 * (p - topLimb*digitBytes))
		}
	}
	n := len(mag)
	a.lo = int32(min(off/digitBytes, topLimb))
	a.hi = int32(min((off+n-1)/digitBytes+1, nLimbs))
	if flags&flagNeg != 0 {
		for i := a.lo; i < a.hi; i++ {
			a.limb[i] = -a.limb[i]
		}
	}
	return end, nil
}

// MergeBinary adds the sum encoded at the start of src (by AppendBinary)
// to a, as DecodeAcc and Merge would without building an Acc, and returns
// the encoding's length. On error a is unchanged.
func (a *Acc) MergeBinary(src []byte) (int, error) {
	flags, off, mag, end, err := parse(src)
	if err != nil {
		return 0, err
	}
	a.special |= flags &^ flagNeg
	if len(mag) == 0 {
		return end, nil
	}
	if a.pending+1 >= normEvery {
		a.normalize()
	}
	neg := int64(0)
	if flags&flagNeg != 0 {
		neg = -1
	}
	for j, c := range mag {
		p := off + j
		var v int64
		var i int
		if p < topLimb*digitBytes {
			i, v = p/digitBytes, int64(c)<<(8*(p%digitBytes))
		} else {
			i, v = topLimb, int64(c)<<(8*(p-topLimb*digitBytes))
		}
		a.limb[i] += (v ^ neg) - neg
	}
	lo := int32(min(off/digitBytes, topLimb))
	hi := int32(min((off+len(mag)-1)/digitBytes+1, nLimbs))
	if a.hi == 0 {
		a.lo, a.hi = lo, hi
	} else {
		a.lo, a.hi = min(a.lo, lo), max(a.hi, hi)
	}
	a.pending++
	return end, nil
}

// EncodedLen checks that src starts with a valid encoding, as DecodeAcc
// does, and returns its length without decoding it.
func EncodedLen(src []byte) (int, error) {
	_, _, _, end, err := parse(src)
	if err != nil {
		return 0, err
	}
	return end, nil
}

// parse checks the encoding at the start of src and returns its flags, the
// magnitude's byte offset, the magnitude (a subslice of src) and where the
// encoding ends.
func parse(src []byte) (flags byte, off int, mag []byte, end int, err error) {
	if len(src) < 2 {
		return 0, 0, nil, 0, fmt.Errorf("%w: short header", ErrFormat)
	}
	if src[0] != encVersion {
		return 0, 0, nil, 0, fmt.Errorf("%w: unknown version %d", ErrFormat, src[0])
	}
	flags = src[1]
	if flags&^flagsAll != 0 {
		return 0, 0, nil, 0, fmt.Errorf("%w: unknown flags %#x", ErrFormat, flags)
	}
	pos := 2
	o, k := uvarint(src[pos:])
	if k <= 0 || o > maxMagBytes {
		return 0, 0, nil, 0, fmt.Errorf("%w: bad offset", ErrFormat)
	}
	pos += k
	n, k := uvarint(src[pos:])
	if k <= 0 || n > maxMagBytes-o {
		return 0, 0, nil, 0, fmt.Errorf("%w: bad length", ErrFormat)
	}
	pos += k
	if uint64(len(src)-pos) < n {
		return 0, 0, nil, 0, fmt.Errorf("%w: magnitude needs %d bytes, %d left", ErrFormat, n, len(src)-pos)
	}
	mag = src[pos : pos+int(n) : pos+int(n)]
	switch {
	case n == 0 && (o != 0 || flags&flagNeg != 0):
		return 0, 0, nil, 0, fmt.Errorf("%w: non-canonical zero", ErrFormat)
	case n > 0 && (mag[0] == 0 || mag[n-1] == 0):
		return 0, 0, nil, 0, fmt.Errorf("%w: non-canonical magnitude", ErrFormat)
	}
	return flags, int(o), mag, pos + int(n), nil
}

// uvarint is binary.Uvarint refusing overlong spellings (a last byte of
// zero after the first), so that every value has one encoding.
func uvarint(src []byte) (uint64, int) {
	v, k := binary.Uvarint(src)
	if k > 1 && src[k-1] == 0 {
		return 0, 0
	}
	return v, k
}
