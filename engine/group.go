package engine

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/xsum"
	"github.com/stratadb/strata/segment"
)

// Aggregation works on partial states (acc), one per bucket, so that the
// buckets of several series can be merged into a group's (Query.GroupBy)
// exactly as the samples of one series are folded: the result does not
// depend on whether samples, whole blocks (their stats) or other partial
// states were added, nor in which order the series came.
//
// Sums are exact. Float samples and block partials (segment
// BlockMeta.Partial) add into an xsum.Acc, whose correctly rounded result
// depends on no order or grouping; int and uint samples into a 128-bit
// integer. An int or uint sum that does not fit its kind saturates: int
// sums clamp to math.MaxInt64 or math.MinInt64, uint sums to
// math.MaxUint64. When numeric kinds mix in a bucket (grouped series of
// different kinds) sum, min and max are float64, the sum being the exact
// sum of every value rounded once; a mean is the exact sum rounded once,
// divided by the count.

// int128 is a two's-complement 128-bit integer.
type int128 struct {
	hi int64
	lo uint64
}

func (a *int128) addInt(v int64) {
	var c uint64
	a.lo, c = bits.Add64(a.lo, uint64(v), 0)
	a.hi += v>>63 + int64(c)
}

func (a *int128) addUint(v uint64) {
	var c uint64
	a.lo, c = bits.Add64(a.lo, v, 0)
	a.hi += int64(c)
}

func (a *int128) add(b int128) {
	var c uint64
	a.lo, c = bits.Add64(a.lo, b.lo, 0)
	a.hi += b.hi + int64(c)
}

func (a int128) float() float64 {
	if a.hi < 0 {
		// -(a) = ^a + 1
		lo, c := bits.Add64(^a.lo, 1, 0)
		hi := ^a.hi + int64(c)
		return -(float64(uint64(hi))*(1<<64) + float64(lo))
	}
	return float64(a.hi)*(1<<64) + float64(a.lo)
}

// int64 returns a clamped to the int64 range.
func (a int128) int64() int64 {
	switch {
	case a.hi == 0 && a.lo <= math.MaxInt64, a.hi == -1 && a.lo > math.MaxInt64:
		return int64(a.lo)
	case a.hi < 0:
		return math.MinInt64
	}
	return math.MaxInt64
}

// uint64 returns a clamped to the uint64 range (a is never negative for
// uint sums).
func (a int128) uint64() uint64 {
	switch {
	case a.hi == 0:
		return a.lo
	case a.hi < 0:
		return 0
	}
	return math.MaxUint64
}

// kindBit marks a numeric kind seen in a bucket.
func kindBit(k Kind) uint8 { return 1 << k }

// acc is the partial aggregate of one bucket.
type acc struct {
	bucket int64
	count  int64
	kinds  uint8    // kindBit of every numeric kind added
	sumF   xsum.Acc // exact sum of float samples
	sumI   int128   // exact sum of int and uint samples
	hasNum bool
	min    point.Value
	max    point.Value
	minT   int64 // time of the earliest sample holding min
	maxT   int64
	first  point.Value
	last   point.Value
	firstT int64
	lastT  int64
}

// cmpNum compares two numeric values, of the same kind or not.
func cmpNum(a, b point.Value) int {
	ka, kb := a.Kind(), b.Kind()
	if ka == kb {
		return point.Compare(a, b)
	}
	switch {
	case ka == KindInt && kb == KindUint:
		if a.Int() < 0 {
			return -1
		}
		return cmp.Compare(uint64(a.Int()), b.Uint())
	case ka == KindUint && kb == KindInt:
		return -cmpNum(b, a)
	}
	return cmp.Compare(numFloat(a), numFloat(b))
}

func numFloat(v point.Value) float64 {
	switch v.Kind() {
	case KindInt:
		return float64(v.Int())
	case KindUint:
		return float64(v.Uint())
	}
	return v.Float()
}

// addSample folds one sample. Within a series samples come in time order;
// across series (a group) on equal times the state already held, from the
// series whose key sorts first, is kept.
func (a *acc) addSample(t int64, v point.Value) {
	if a.count == 0 || t < a.firstT {
		a.first, a.firstT = v, t
	}
	if a.count == 0 || t > a.lastT {
		a.last, a.lastT = v, t
	}
	a.count++
	k := v.Kind()
	if !k.Numeric() {
		return
	}
	a.kinds |= kindBit(k)
	switch k {
	case KindFloat:
		a.sumF.Add(v.Float())
	case KindInt:
		a.sumI.addInt(v.Int())
	case KindUint:
		a.sumI.addUint(v.Uint())
	}
	a.minMax(v, t, v, t)
}

func (a *acc) minMax(mn point.Value, mnT int64, mx point.Value, mxT int64) {
	if !a.hasNum {
		a.hasNum = true
		a.min, a.minT, a.max, a.maxT = mn, mnT, mx, mxT
		return
	}
	if c := cmpNum(mn, a.min); c < 0 || (c == 0 && mnT < a.minT) {
		a.min, a.minT = mn, mnT
	}
	if c := cmpNum(mx, a.max); c > 0 || (c == 0 && mxT < a.maxT) {
		a.max, a.maxT = mx, mxT
	}
}

// addBlock folds a whole block's stats: its count and, for numbers, its sum
// and min/max (their times are the block's first sample's, an
// approximation that only bucketed queries, which report bucket starts,
// rely on). first and last are left to samples. A float block's sum is its
// exact partial: the caller checks blockSumExact first.
func (a *acc) addBlock(bm *segment.BlockMeta, kind Kind, withMinMax bool) {
	a.count += int64(bm.Count)
	if !kind.Numeric() {
		return
	}
	a.kinds |= kindBit(kind)
	switch kind {
	case KindFloat:
		if bm.Partial != nil {
			// Validated when the segment's index was read.
			_, _ = a.sumF.MergeBinary(bm.Partial)
		}
	case KindInt:
		a.sumI.addInt(bm.Sum.Int())
	case KindUint:
		a.sumI.addUint(bm.Sum.Uint())
	}
	if withMinMax {
		a.minMax(bm.Min, bm.MinTime, bm.Max, bm.MinTime)
	}
}

// blockSumExact reports whether a block's stored sum is its exact sum: a
// float block's when it has an exact partial (segment format 3; older
// blocks' sums were added in time order); an int or uint sum of Count
// values in [Min, Max] cannot have wrapped when Count*Min and Count*Max fit
// the kind.
func blockSumExact(bm *segment.BlockMeta, kind Kind) bool {
	n := uint64(bm.Count)
	switch kind {
	case KindFloat:
		return bm.Partial != nil
	case KindInt:
		fits := func(v int64) bool {
			if v == 0 || n == 0 {
				return true
			}
			abs := uint64(v)
			if v < 0 {
				abs = -abs
			}
			hi, lo := bits.Mul64(abs, n)
			if hi != 0 {
				return false
			}
			if v < 0 {
				return lo <= 1<<63
			}
			return lo <= math.MaxInt64
		}
		return fits(bm.Min.Int()) && fits(bm.Max.Int())
	case KindUint:
		hi, _ := bits.Mul64(bm.Max.Uint(), n)
		return hi == 0
	}
	return true
}

// merge folds another partial state of the same bucket, from a series
// whose key sorts after every series already in a.
func (a *acc) merge(b *acc) {
	if b.count == 0 {
		return
	}
	if a.count == 0 || b.firstT < a.firstT {
		a.first, a.firstT = b.first, b.firstT
	}
	if a.count == 0 || b.lastT > a.lastT {
		a.last, a.lastT = b.last, b.lastT
	}
	a.count += b.count
	a.kinds |= b.kinds
	a.sumF.Merge(&b.sumF)
	a.sumI.add(b.sumI)
	if b.hasNum {
		a.minMax(b.min, b.minT, b.max, b.maxT)
	}
}

// result returns the bucket's aggregate and its time: the bucket start,
// or with every == 0 the selected sample's own time for first, last, min
// and max.
func (a *acc) result(agg Aggregate, every int64) (point.Sample, bool) {
	if a.count == 0 {
		return point.Sample{}, false
	}
	mixed := bits.OnesCount8(a.kinds) > 1
	t := a.bucket
	var v point.Value
	switch agg {
	case AggCount:
		v = point.Int(a.count)
	case AggFirst:
		v, t = a.first, a.firstT
	case AggLast:
		v, t = a.last, a.lastT
	case AggSum, AggMean:
		if a.kinds == 0 {
			return point.Sample{}, false
		}
		if agg == AggMean {
			v = point.Float(a.exactSum() / float64(a.count))
			break
		}
		switch {
		case mixed:
			v = point.Float(a.exactSum())
		case a.kinds == kindBit(KindFloat):
			v = point.Float(a.sumF.Float64())
		case a.kinds == kindBit(KindInt):
			v = point.Int(a.sumI.int64())
		default:
			v = point.Uint(a.sumI.uint64())
		}
	case AggMin, AggMax:
		if !a.hasNum {
			return point.Sample{}, false
		}
		v, t = a.min, a.minT
		if agg == AggMax {
			v, t = a.max, a.maxT
		}
		if mixed {
			v = point.Float(numFloat(v))
		}
	}
	if every > 0 {
		t = a.bucket
	}
	return point.Sample{Time: t, Value: v}, true
}

// exactSum returns the exact sum of every number in the bucket, float, int
// and uint, rounded once to the nearest float64.
func (a *acc) exactSum() float64 {
	if a.kinds&(kindBit(KindInt)|kindBit(KindUint)) == 0 {
		return a.sumF.Float64()
	}
	s := a.sumF
	// sumI = hi*2^64 + lo, in four parts of at most 32 bits: each is a
	// float64 exactly.
	hi, lo := a.sumI.hi, a.sumI.lo
	s.Add(float64(uint32(lo)))
	s.Add(float64(lo>>32) * 0x1p32)
	s.Add(float64(uint32(hi)) * 0x1p64)
	s.Add(float64(hi>>32) * 0x1p96)
	return s.Float64()
}

// bucketer maps sample times to bucket starts.
type bucketer struct {
	every int64
	start int64 // the one bucket's time when every == 0
}

// bucket returns the start of the bucket t falls in: epoch-aligned with
// flooring for negative t, or the query start when Every is 0.
func (b bucketer) bucket(t int64) int64 {
	if b.every == 0 {
		return b.start
	}
	m := t % b.every
	if m < 0 {
		m += b.every
	}
	if t < math.MinInt64+m {
		return math.MinInt64 // the bucket starts below the int64 range: clamp
	}
	return t - m
}

// accs collects the buckets of one series in time order.
type accs struct {
	b    bucketer
	out  []acc
	bits []uint64 // addSamples' scratch
	// finish, when set, takes each bucket's result as soon as a later
	// bucket starts, so that out holds one state instead of one per
	// bucket of the series.
	finish *finished
}

// last returns the last time of the bucket starting at start: math.MaxInt64
// when the bucket reaches the end of the int64 range. A bucket whose aligned
// start lies below the int64 range (bucket clamped it to math.MinInt64)
// ends just before the next aligned bucket, less than Every after
// math.MinInt64. An inclusive end, so that a bucket ending exactly at
// math.MaxInt64 (Every dividing it) is told from the one starting there.
func (b bucketer) last(start int64) int64 {
	if b.every == 0 {
		return math.MaxInt64
	}
	if m := start % b.every; m != 0 {
		// Only a clamped start is unaligned: m is negative.
		return start - m - 1
	}
	if start > math.MaxInt64-b.every {
		return math.MaxInt64
	}
	return start + b.every - 1
}

// addSamples folds time-sorted samples of one series, of kind kind, bucket
// by bucket. Count, sum and mean need only counts and sums: a bucket's run
// of samples is added in one go, its float sum with xsum.Acc.AddBits.
// Other aggregates fold sample by sample (addSample).
func (s *accs) addSamples(samples []point.Sample, kind Kind, agg Aggregate) {
	if agg != AggCount && agg != AggSum && agg != AggMean {
		for i := range samples {
			s.at(samples[i].Time).addSample(samples[i].Time, samples[i].Value)
		}
		return
	}
	for len(samples) > 0 {
		a := s.at(samples[0].Time)
		n := len(samples)
		if last := s.b.last(a.bucket); samples[n-1].Time > last {
			n, _ = slices.BinarySearchFunc(samples, last+1, func(x point.Sample, t int64) int { return cmp.Compare(x.Time, t) })
		}
		run := samples[:n:n]
		samples = samples[n:]
		if a.count == 0 || run[0].Time < a.firstT {
			a.first, a.firstT = run[0].Value, run[0].Time
		}
		if a.count == 0 || run[n-1].Time > a.lastT {
			a.last, a.lastT = run[n-1].Value, run[n-1].Time
		}
		a.count += int64(n)
		if agg == AggCount || !kind.Numeric() {
			continue
		}
		a.kinds |= kindBit(kind)
		switch kind {
		case KindFloat:
			bits := s.bits[:0]
			for i := range run {
				bits = append(bits, run[i].Value.Bits())
			}
			a.sumF.AddBits(bits)
			s.bits = bits
		case KindInt:
			for i := range run {
				a.sumI.addInt(run[i].Value.Int())
			}
		case KindUint:
			for i := range run {
				a.sumI.addUint(run[i].Value.Uint())
			}
		}
	}
}

// at returns the state of the bucket holding t, which is never before the
// last one returned.
func (s *accs) at(t int64) *acc {
	b := s.b.bucket(t)
	if n := len(s.out); n > 0 && s.out[n-1].bucket == b {
		return &s.out[n-1]
	}
	if s.finish != nil && len(s.out) > 0 {
		// A later bucket starts, so the one held is complete: turn it
		// into its result and reuse its state, holding one at a time.
		if smp, ok := s.out[0].result(s.finish.agg, s.b.every); ok {
			s.finish.done = append(s.finish.done, smp)
		}
		s.out[0] = acc{bucket: b}
		return &s.out[0]
	}
	s.out = append(s.out, acc{bucket: b})
	return &s.out[len(s.out)-1]
}

// finished collects the results of the buckets accs has completed, when
// it folds one series on its own (no group to merge it into).
type finished struct {
	agg  Aggregate
	done []point.Sample
}

// mergeAccs merges the buckets of a series (src) into a group's (dst),
// both sorted by bucket, and returns the result.
func mergeAccs(dst, src []acc) []acc {
	if len(dst) == 0 {
		return append(dst, src...)
	}
	if len(src) == 0 {
		return dst
	}
	if src[0].bucket > dst[len(dst)-1].bucket {
		return append(dst, src...) // all after: rollups before raw samples
	}
	// Common case: the same buckets, or src within dst's: in place.
	within := true
	for i, j := 0, 0; j < len(src); j++ {
		for i < len(dst) && dst[i].bucket < src[j].bucket {
			i++
		}
		if i == len(dst) || dst[i].bucket != src[j].bucket {
			within = false
			break
		}
	}
	if within {
		i := 0
		for j := range src {
			for dst[i].bucket < src[j].bucket {
				i++
			}
			dst[i].merge(&src[j])
		}
		return dst
	}
	// Else one pass into a new slice: a state is large, so sorting them
	// (swapping whole states) would cost far more than copying each once.
	out := make([]acc, 0, len(dst)+len(src))
	i, j := 0, 0
	for i < len(dst) || j < len(src) {
		switch {
		case j == len(src) || (i < len(dst) && dst[i].bucket < src[j].bucket):
			out = append(out, dst[i])
			i++
		case i == len(dst) || src[j].bucket < dst[i].bucket:
			out = append(out, src[j])
			j++
		default:
			out = append(out, dst[i])
			out[len(out)-1].merge(&src[j])
			i++
			j++
		}
	}
	return out
}

// finishAccs turns bucket states into result samples.
func finishAccs(states []acc, agg Aggregate, every int64, dst []point.Sample) []point.Sample {
	for i := range states {
		if s, ok := states[i].result(agg, every); ok {
			dst = append(dst, s)
		}
	}
	return dst
}

// normalizeGroupBy validates GroupBy keys and returns them sorted and
// distinct (nil stays nil).
func normalizeGroupBy(keys []string) ([]string, error) {
	if keys == nil {
		return nil, nil
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if k == "" || strings.ContainsAny(k, "\n\r") {
			return nil, fmt.Errorf("%w: bad group-by key %q", ErrInvalid, k)
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
