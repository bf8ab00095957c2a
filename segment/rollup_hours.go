package segment

// Hour summaries of rollup blocks (format 4, optional). A rollup block of
// buckets of a minute or less spans up to a UTC day (1,440 one-minute
// buckets), so an hourly query would decode all of them. Beside such a
// block the writer stores the statistics of each UTC hour it holds, in a
// small frame of its own right after the block, so that a reader folds
// an hour from its summary without decompressing the block. A series
// entry whose kind byte has bit 5 set, as well as bits 7 and 6
// (kind | 0xE0), follows each rollup entry's summary with the length of
// that frame (0: the block has none):
//
//	rollup entry with hours:
//	+---------------------------+------------------+
//	| rollup entry with summary | hoursLen uvarint |
//	+---------------------------+------------------+
//
//	data area: ... | rollup block (length) | hours frame (hoursLen) | next rollup block ...
//
// The hours frame is framed like a block (flags, rawLen, payload,
// crc32c). Its raw form:
//
//	+-----------+----------+------------+-------------------+
//	| 0x81 (1)  | kind (1) | n uvarint  | hour entry x n    |
//	+-----------+----------+------------+-------------------+
//
//	hour entry:
//	+-----------------+---------------+----------------+--------------------------------+
//	| buckets uvarint | start uvarint | span uvarint   | summary (rollup_summary.go)    |
//	+-----------------+---------------+----------------+--------------------------------+
//
//	buckets  how many of the block's buckets the hour holds, >= 1; the
//	         hours' buckets add up to the block's count
//	start    the hour's first bucket start minus the previous hour's
//	         (the first: minus the block's minTime, so 0)
//	span     the latest LastT of the hour's buckets minus its start
//	summary  as a rollup entry's, relative to the hour's start and span;
//	         the hours' samples add up to the block summary's
//
// Hours are in time order and do not overlap: each starts after the
// previous one's span ends, and the last one ends at the block's maxTime.
// A reader that finds the bit checks all of this; one that knows no hours
// refuses the kind byte, so such a file is never misread.

import (
	"bytes"
	"fmt"
	"math"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/decbuf"
	"github.com/stratadb/strata/internal/encoding"
	"github.com/stratadb/strata/internal/point"
)

const (
	kindRollupHours = 0x20 // bit of a format 4 series entry's kind byte, with kindHasRollups and kindRollupSummaries
	rollupHoursTag  = 0x81 // first byte of a raw hours frame

	rollupHour = int64(3600e9)
	// rollupHoursMaxEvery is the longest bucket whose blocks get hour
	// summaries: an hour then holds at least 60 buckets.
	rollupHoursMaxEvery = int64(60e9)
)

// hourOf returns the start of the epoch-aligned UTC hour holding t.
func hourOf(t int64) int64 {
	h := t - t%rollupHour
	if t%rollupHour < 0 {
		h -= rollupHour
	}
	return h
}

// appendRollupHours appends to dst the raw hours frame of the buckets rs
// of one rollup block, and reports false (appending nothing) when the
// block gets none: buckets longer than rollupHoursMaxEvery, or a block
// inside one hour (its own summary serves).
func appendRollupHours(dst []byte, kind point.Kind, rs []Rollup) ([]byte, bool) {
	if rs[0].Every > rollupHoursMaxEvery || hourOf(rs[0].Start) == hourOf(rs[len(rs)-1].Start) {
		return dst, false
	}
	n := 1
	for i := 1; i < len(rs); i++ {
		if hourOf(rs[i].Start) != hourOf(rs[i-1].Start) {
			n++
		}
	}
	dst = append(dst, rollupHoursTag, byte(kind))
	dst = encoding.AppendUvarint(dst, uint64(n))
	prev := rs[0].Start
	for len(rs) > 0 {
		j := 1
		for j < len(rs) && hourOf(rs[j].Start) == hourOf(rs[0].Start) {
			j++
		}
		hour := rs[:j]
		rs = rs[j:]
		rm := RollupMeta{MinTime: hour[0].Start, MaxTime: math.MinInt64, Count: j, Summary: summarize(hour)}
		for i := range hour {
			rm.MaxTime = max(rm.MaxTime, hour[i].LastT)
		}
		dst = encoding.AppendUvarint(dst, uint64(j))
		dst = encoding.AppendUvarint(dst, uint64(rm.MinTime-prev))
		dst = encoding.AppendUvarint(dst, uint64(rm.MaxTime-rm.MinTime))
		dst = appendRollupSummary(dst, kind, &rm)
		prev = rm.MinTime
	}
	return dst, true
}

// minRollupHour is the smallest encoded hour entry: three uvarints, the
// summary's four uvarints, four values and a one-byte sum.
const minRollupHour = 3 + 4 + 4*8 + 1

// ReadRollupHours appends to dst the hours of rollup block b of s, each
// as a RollupMeta with its Summary (Offset and Length zero), or reports
// false when the block has none.
func (r *Reader) ReadRollupHours(s *SeriesIndex, b int, dst []RollupMeta) ([]RollupMeta, bool, error) {
	if b < 0 || b >= len(s.Rollups) {
		return dst, false, fmt.Errorf("%w: segment: %s: rollup block %d of %d", base.ErrInvalid, r.path, b, len(s.Rollups))
	}
	rm := &s.Rollups[b]
	if rm.HoursLength == 0 {
		return dst, false, nil
	}
	off := rm.Offset + int64(rm.Length)
	sc := scratchPool.Get().(*blockScratch)
	defer func() {
		if cap(sc.raw) <= maxPooledScratch && cap(sc.alt) <= maxPooledScratch {
			scratchPool.Put(sc)
		}
	}()
	stored := make([]byte, rm.HoursLength)
	if err := r.readAt(stored, off); err != nil {
		return dst, false, err
	}
	raw, err := unframe(stored, maxRollupHoursRaw(s.Kind, rm.Count), sc)
	if err == nil {
		dst, err = parseRollupHours(dst, raw, s.Kind, rm)
	}
	if err != nil {
		return dst, false, r.corrupt(off, fmt.Errorf("hours of rollup block %d of %q: %w", b, s.Key, err))
	}
	return dst, true, nil
}

// maxRollupHoursRaw bounds the raw hours frame of a block of count
// buckets: at most one hour a bucket.
func maxRollupHoursRaw(kind point.Kind, count int) int {
	return 16 + count*(3*10+maxRollupSummary(kind))
}

// maxRollupSummary bounds an encoded summary: four uvarints, four values
// and a float sum of at most 64 partials (or an int128).
func maxRollupSummary(kind point.Kind) int {
	if kind == point.KindFloat {
		return 4*10 + 4*8 + 16 + 64*8
	}
	return 4*10 + 4*8 + 2*10
}

// parseRollupHours appends the hours of raw hours frame raw, checked
// against the block rm they summarize, to dst.
func parseRollupHours(dst []RollupMeta, raw []byte, kind point.Kind, rm *RollupMeta) ([]RollupMeta, error) {
	base := len(dst)
	c := decbuf.New(raw)
	tag, k := c.Byte("tag"), c.Byte("kind")
	n := c.Uvarint("hour count")
	if c.Err() != nil {
		return dst, c.Err()
	}
	switch {
	case tag != rollupHoursTag:
		return dst, fmt.Errorf("tag %#x", tag)
	case point.Kind(k) != kind:
		return dst, fmt.Errorf("kind %d, series is %v", k, kind)
	case n < 2 || n > uint64(rm.Count) || n > uint64(c.Len()/minRollupHour):
		return dst, fmt.Errorf("%d hours of %d buckets in %d bytes", n, rm.Count, c.Len())
	case rm.Summary == nil:
		return dst, fmt.Errorf("hours of a block without a summary")
	}
	buckets, samples := 0, int64(0)
	prevStart, prevEnd := rm.MinTime, int64(math.MinInt64)
	for i := range int(n) {
		h := RollupMeta{Every: rm.Every}
		count := c.Uvarint("buckets")
		delta := c.Uvarint("start")
		span := c.Uvarint("span")
		if c.Err() != nil {
			return dst[:base], c.Err()
		}
		if count == 0 || count > uint64(rm.Count-buckets) {
			return dst[:base], fmt.Errorf("hour %d: %d buckets, %d left", i, count, rm.Count-buckets)
		}
		if (i == 0 && delta != 0) || delta > uint64(rm.MaxTime-prevStart) || span > uint64(rm.MaxTime-prevStart)-delta {
			return dst[:base], fmt.Errorf("hour %d: start +%d, span %d out of the block's %d..%d", i, delta, span, rm.MinTime, rm.MaxTime)
		}
		h.MinTime = prevStart + int64(delta)
		h.MaxTime = h.MinTime + int64(span)
		h.Count = int(count)
		if h.MinTime <= prevEnd {
			return dst[:base], fmt.Errorf("hour %d starts at %d, before the previous one ends at %d", i, h.MinTime, prevEnd)
		}
		if err := parseRollupSummary(&c, kind, &h); err != nil {
			return dst[:base], fmt.Errorf("hour %d: %w", i, err)
		}
		buckets += h.Count
		samples += h.Summary.Count
		if samples < 0 {
			return dst[:base], fmt.Errorf("hour %d: sample count overflows", i)
		}
		prevStart, prevEnd = h.MinTime, h.MaxTime
		dst = append(dst, h)
	}
	switch {
	case c.Len() != 0:
		return dst[:base], fmt.Errorf("%d bytes after the hours", c.Len())
	case buckets != rm.Count:
		return dst[:base], fmt.Errorf("hours hold %d buckets, the block %d", buckets, rm.Count)
	case prevEnd != rm.MaxTime:
		return dst[:base], fmt.Errorf("hours end at %d, the block at %d", prevEnd, rm.MaxTime)
	case samples != rm.Summary.Count:
		return dst[:base], fmt.Errorf("hours hold %d samples, the block %d", samples, rm.Summary.Count)
	}
	return dst, nil
}

// CheckRollupHours reads rollup block b of s and its hours, if it has
// any, and reports corruption unless every hour's summary is the fold of
// the block's buckets in that hour (the check verify and repair make;
// queries trust the checksummed hours).
func (r *Reader) CheckRollupHours(s *SeriesIndex, b int) error {
	rus, err := r.ReadRollups(s, b, nil)
	if err != nil {
		return err
	}
	hours, ok, err := r.ReadRollupHours(s, b, nil)
	if err != nil || !ok {
		return err
	}
	rm := &s.Rollups[b]
	for i := range hours {
		h := &hours[i]
		in := rus[:h.Count]
		rus = rus[h.Count:]
		maxT := int64(math.MinInt64)
		for j := range in {
			maxT = max(maxT, in[j].LastT)
		}
		first, last := in[0].Start, in[len(in)-1].Start
		split := hourOf(first) != hourOf(last) || (len(rus) > 0 && hourOf(rus[0].Start) == hourOf(last))
		if split || h.MinTime != first || h.MaxTime != maxT || !sameSummary(h.Summary, summarize(in)) {
			return r.corrupt(rm.Offset+int64(rm.Length), fmt.Errorf("hour %d of rollup block %d of %q does not summarize its buckets", i, b, s.Key))
		}
	}
	return nil
}

// sameSummary reports whether two summaries hold the same statistics.
func sameSummary(a, b *RollupSummary) bool {
	return a.Count == b.Count && bytes.Equal(a.SumF, b.SumF) && a.SumI == b.SumI &&
		a.First.Bits() == b.First.Bits() && a.Last.Bits() == b.Last.Bits() &&
		a.Min.Bits() == b.Min.Bits() && a.Max.Bits() == b.Max.Bits() &&
		a.FirstT == b.FirstT && a.MinT == b.MinT && a.MaxT == b.MaxT
}
