package segment

// Rollup blocks (format 4): a series' samples reduced, bucket by bucket,
// to their statistics (see engine's downsampling). A series entry whose
// kind byte has bit 7 set (kind | 0x80) lists its rollup blocks before its
// sample blocks, and its stored rollup blocks come before its sample
// blocks in the data area:
//
//	series entry, format 4 with rollups:
//	+----------------+-----+-----------------+-----------------+-------------------------+-----------------+-----------------------+
//	| keyLen uvarint | key | kind|0x80 (1)   | nRollup uvarint | rollup entry x nRollup  | nBlocks uvarint | block entry x nBlocks |
//	+----------------+-----+-----------------+-----------------+-------------------------+-----------------+-----------------------+
//
//	nRollup is at least 1; nBlocks may then be 0 (a series whose samples
//	are all rolled up). Only float, int and uint series have rollups.
//
//	rollup entry (the block is always stored; its offset is implied):
//	+----------------+---------------+------------------+--------------+---------------+
//	| length uvarint | every uvarint | minTime varint   | span uvarint | count uvarint |
//	+----------------+---------------+------------------+--------------+---------------+
//
//	minTime  the first bucket's start; span: the latest LastT of the
//	         block's buckets minus minTime; count: buckets, 1..MaxBlockSamples.
//	         The first bucket of a rollup block starts after the last
//	         bucket of the previous one. With bit 6 of the kind byte also
//	         set (kind|0xC0), the block's summary follows count
//	         (rollup_summary.go draws it). A writer does not let a block
//	         cross a UTC day.
//
// A rollup block is framed like a sample block (flags, rawLen, payload,
// crc32c). Its raw form starts with the tag 0x80, which no sample block
// kind uses:
//
//	+-----------+----------+---------------+---------------+--------------------+---------+
//	| 0x80 (1)  | kind (1) | every uvarint | count uvarint | tsLen uvarint + ts | columns |
//	+-----------+----------+---------------+---------------+--------------------+---------+
//
//	ts       encoding.AppendTimestamps of the bucket starts: strictly
//	         increasing multiples of every
//	columns  in this order, each of count values:
//	           counts                       encoding.AppendInts (each >= 1)
//	           firstT, lastT, minT, maxT    encoding.AppendInts of the time
//	                                        minus the bucket start, each in
//	                                        [0, every); firstT <= lastT
//	           first, last, min, max        float: encoding.AppendFloats
//	                                        (Gorilla); int, uint:
//	                                        encoding.AppendInts of the bits
//	           sums                         float: per bucket the exact
//	                                        partial sum (xsum.Acc
//	                                        AppendBinary); int, uint:
//	                                        AppendInts of the high 64 bits
//	                                        of the 128-bit two's-complement
//	                                        sum, then AppendInts of the low
//	These constants are part of the durable format and must not be changed.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/decbuf"
	"github.com/stratadb/strata/internal/encoding"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/xsum"
)

const (
	rollupTag      = 0x80 // first byte of a raw rollup block
	kindHasRollups = 0x80 // bit of a format 4 series entry's kind byte
)

// Int128 is a two's-complement 128-bit integer: the exact sum of int or
// uint samples.
type Int128 struct {
	Hi int64
	Lo uint64
}

// Rollup is one Every-wide bucket of a series' samples reduced to their
// statistics.
type Rollup struct {
	Start, Every int64 // the bucket is [Start, Start+Every)
	Count        int64
	SumF         xsum.Acc // float series: the exact sum
	SumI         Int128   // int and uint series: the exact sum
	First, Last  point.Value
	Min, Max     point.Value
	FirstT       int64
	LastT        int64
	MinT, MaxT   int64 // time of the earliest sample holding Min (Max)
}

// RollupMeta locates a stored rollup block.
type RollupMeta struct {
	Offset           int64
	Length           uint32
	Every            int64
	MinTime, MaxTime int64 // first bucket's start, latest LastT
	Count            int   // buckets
	// Summary is the whole block's statistics, nil in files written
	// before summaries (rollup_summary.go).
	Summary *RollupSummary
	// HoursLength is the length of the block's hours frame, stored right
	// after it (rollup_hours.go); 0 when it has none.
	HoursLength uint32
}

// maxRollupRaw bounds a raw rollup block of count buckets: 9 columns of at
// most 10 bytes a bucket, and float partial sums of at most 64 partials.
func maxRollupRaw(kind point.Kind, count int) int {
	if kind == point.KindFloat {
		return 64 + count*(100+20+64*8)
	}
	return 64 + 130*count
}

// rollupKind reports whether series of kind k may have rollups.
func rollupKind(k point.Kind) bool {
	return k == point.KindFloat || k == point.KindInt || k == point.KindUint
}

// appendRollupBlock appends the raw rollup block of rs (all of kind and
// every) to dst.
func appendRollupBlock(dst []byte, kind point.Kind, every int64, rs []Rollup, sc *blockScratch) []byte {
	dst = append(dst, rollupTag, byte(kind))
	dst = encoding.AppendUvarint(dst, uint64(every))
	dst = encoding.AppendUvarint(dst, uint64(len(rs)))
	ts := sc.ts[:0]
	for i := range rs {
		ts = append(ts, rs[i].Start)
	}
	sc.ts = ts
	enc := encoding.AppendTimestamps(sc.alt[:0], ts)
	sc.alt = enc
	dst = encoding.AppendUvarint(dst, uint64(len(enc)))
	dst = append(dst, enc...)
	col := func(f func(r *Rollup) uint64) {
		vals := sc.vals[:0]
		for i := range rs {
			vals = append(vals, f(&rs[i]))
		}
		sc.vals = vals
		dst = encoding.AppendInts(dst, vals)
	}
	col(func(r *Rollup) uint64 { return uint64(r.Count) })
	col(func(r *Rollup) uint64 { return uint64(r.FirstT - r.Start) })
	col(func(r *Rollup) uint64 { return uint64(r.LastT - r.Start) })
	col(func(r *Rollup) uint64 { return uint64(r.MinT - r.Start) })
	col(func(r *Rollup) uint64 { return uint64(r.MaxT - r.Start) })
	for _, get := range []func(r *Rollup) point.Value{
		func(r *Rollup) point.Value { return r.First },
		func(r *Rollup) point.Value { return r.Last },
		func(r *Rollup) point.Value { return r.Min },
		func(r *Rollup) point.Value { return r.Max },
	} {
		vals := sc.vals[:0]
		for i := range rs {
			vals = append(vals, get(&rs[i]).Bits())
		}
		sc.vals = vals
		if kind == point.KindFloat {
			dst = encoding.AppendFloats(dst, vals)
		} else {
			dst = encoding.AppendInts(dst, vals)
		}
	}
	if kind == point.KindFloat {
		for i := range rs {
			dst = rs[i].SumF.AppendBinary(dst)
		}
		return dst
	}
	col(func(r *Rollup) uint64 { return uint64(r.SumI.Hi) })
	col(func(r *Rollup) uint64 { return r.SumI.Lo })
	return dst
}

// decodeRollupBlock appends the buckets of raw rollup block raw to dst
// after checking it against its index entry.
func decodeRollupBlock(dst []Rollup, raw []byte, kind point.Kind, rm *RollupMeta, sc *blockScratch) ([]Rollup, error) {
	base := len(dst)
	dst, err := parseRollupBlock(dst, raw, kind, sc)
	if err != nil {
		return dst[:base], err
	}
	out := dst[base:]
	maxT := int64(math.MinInt64)
	for i := range out {
		maxT = max(maxT, out[i].LastT)
	}
	switch {
	case out[0].Every != rm.Every:
		err = fmt.Errorf("rollup block every %d, index says %d", out[0].Every, rm.Every)
	case len(out) != rm.Count:
		err = fmt.Errorf("rollup block holds %d buckets, index says %d", len(out), rm.Count)
	case out[0].Start != rm.MinTime || maxT != rm.MaxTime:
		err = fmt.Errorf("rollup block spans %d..%d, index says %d..%d", out[0].Start, maxT, rm.MinTime, rm.MaxTime)
	}
	if err != nil {
		return dst[:base], err
	}
	return dst, nil
}

// parseRollupBlock appends the buckets of raw rollup block raw, checked
// for consistency, to dst.
func parseRollupBlock(dst []Rollup, raw []byte, kind point.Kind, sc *blockScratch) ([]Rollup, error) {
	if len(raw) < 4 || raw[0] != rollupTag {
		return dst, errors.New("not a rollup block")
	}
	if point.Kind(raw[1]) != kind || !rollupKind(kind) {
		return dst, fmt.Errorf("rollup block kind %d, series kind %d", raw[1], kind)
	}
	every, rest, err := encoding.Uvarint(raw[2:])
	if err != nil {
		return dst, fmt.Errorf("every: %w", err)
	}
	if every == 0 || every > math.MaxInt64 {
		return dst, fmt.Errorf("every %d", every)
	}
	count, rest, err := encoding.Uvarint(rest)
	if err != nil {
		return dst, fmt.Errorf("count: %w", err)
	}
	if count == 0 || count > MaxBlockSamples {
		return dst, fmt.Errorf("count %d", count)
	}
	n := int(count)
	tsLen, rest, err := encoding.Uvarint(rest)
	if err != nil || tsLen > uint64(len(rest)) {
		return dst, fmt.Errorf("bucket starts length %d: %v", tsLen, err)
	}
	starts, tail, err := encoding.DecodeTimestamps(sc.ts[:0], rest[:tsLen], n)
	sc.ts = starts
	if err != nil {
		return dst, fmt.Errorf("bucket starts: %w", err)
	}
	if len(tail) != 0 {
		return dst, fmt.Errorf("%d bytes after bucket starts", len(tail))
	}
	ev := int64(every)
	base := len(dst)
	dst = slices.Grow(dst, n)[:base+n]
	out := dst[base:]
	for i := range out {
		// Every field is set below: SumF for floats, SumI for the rest.
		out[i].SumI = Int128{}
		if i > 0 && starts[i] <= starts[i-1] {
			return dst[:base], fmt.Errorf("bucket %d at %d not after %d", i, starts[i], starts[i-1])
		}
		if starts[i]%ev != 0 || starts[i] > math.MaxInt64-ev+1 {
			return dst[:base], fmt.Errorf("bucket %d at %d not a multiple of %d", i, starts[i], ev)
		}
		out[i].Start, out[i].Every = starts[i], ev
	}
	col := rest[tsLen:]
	ints := func(name string, set func(r *Rollup, v uint64) error) error {
		vals, t, err := encoding.DecodeInts(sc.vals[:0], col, n)
		sc.vals = vals
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		col = t
		for i := range out {
			if err := set(&out[i], vals[i]); err != nil {
				return fmt.Errorf("%s of bucket %d: %w", name, i, err)
			}
		}
		return nil
	}
	// Counts, then the four time columns, each in a plain loop: this is
	// most of a rollup read.
	vals, t, err := encoding.DecodeInts(sc.vals[:0], col, n)
	sc.vals = vals
	if err != nil {
		return dst[:base], fmt.Errorf("counts: %w", err)
	}
	col = t
	for i, v := range vals[:n] {
		if v == 0 || v > math.MaxInt64 {
			return dst[:base], fmt.Errorf("count of bucket %d: %d", i, v)
		}
		out[i].Count = int64(v)
	}
	for c, name := range [4]string{"first times", "last times", "min times", "max times"} {
		vals, t, err := encoding.DecodeInts(sc.vals[:0], col, n)
		sc.vals = vals
		if err != nil {
			return dst[:base], fmt.Errorf("%s: %w", name, err)
		}
		col = t
		for i, v := range vals[:n] {
			if v >= every {
				return dst[:base], fmt.Errorf("%s of bucket %d: offset %d not below %d", name, i, v, every)
			}
			at := out[i].Start + int64(v)
			switch c {
			case 0:
				out[i].FirstT = at
			case 1:
				out[i].LastT = at
			case 2:
				out[i].MinT = at
			default:
				out[i].MaxT = at
			}
		}
	}
	for i := range out {
		r := &out[i]
		if r.FirstT > r.LastT || r.MinT < r.FirstT || r.MinT > r.LastT || r.MaxT < r.FirstT || r.MaxT > r.LastT {
			return dst[:base], fmt.Errorf("bucket %d: times out of order", i)
		}
		if i > 0 && r.FirstT <= out[i-1].LastT {
			return dst[:base], fmt.Errorf("bucket %d overlaps bucket %d", i, i-1)
		}
	}
	for v := range 4 {
		var vals []uint64
		var t []byte
		if kind == point.KindFloat {
			vals, t, err = encoding.DecodeFloats(sc.vals[:0], col, n)
		} else {
			vals, t, err = encoding.DecodeInts(sc.vals[:0], col, n)
		}
		sc.vals = vals
		if err != nil {
			return dst[:base], fmt.Errorf("values %d: %w", v, err)
		}
		col = t
		for i := range out {
			x := point.FromBits(kind, vals[i])
			switch v {
			case 0:
				out[i].First = x
			case 1:
				out[i].Last = x
			case 2:
				out[i].Min = x
			case 3:
				out[i].Max = x
			}
		}
	}
	if kind == point.KindFloat {
		for i := range out {
			a, k, err := xsum.DecodeAcc(col)
			if err != nil {
				return dst[:base], fmt.Errorf("sum of bucket %d: %w", i, err)
			}
			out[i].SumF = a
			col = col[k:]
		}
	} else {
		for i := range out {
			out[i].SumF = xsum.Acc{}
		}
		if err := ints("sums", func(r *Rollup, v uint64) error { r.SumI.Hi = int64(v); return nil }); err != nil {
			return dst[:base], err
		}
		if err := ints("sums", func(r *Rollup, v uint64) error { r.SumI.Lo = v; return nil }); err != nil {
			return dst[:base], err
		}
	}
	if len(col) != 0 {
		return dst[:base], fmt.Errorf("%d bytes after the sums", len(col))
	}
	return dst, nil
}

// ReadRollups decodes rollup block b of s, appending its buckets to dst.
func (r *Reader) ReadRollups(s *SeriesIndex, b int, dst []Rollup) ([]Rollup, error) {
	if b < 0 || b >= len(s.Rollups) {
		return dst, fmt.Errorf("%w: segment: %s: rollup block %d of %d", base.ErrInvalid, r.path, b, len(s.Rollups))
	}
	rm := &s.Rollups[b]
	sc := scratchPool.Get().(*blockScratch)
	defer func() {
		if cap(sc.raw) <= maxPooledScratch && cap(sc.alt) <= maxPooledScratch {
			scratchPool.Put(sc)
		}
	}()
	stored := make([]byte, rm.Length)
	if err := r.readAt(stored, rm.Offset); err != nil {
		return dst, err
	}
	raw, err := unframe(stored, maxRollupRaw(s.Kind, rm.Count), sc)
	if err != nil {
		return dst, r.corrupt(rm.Offset, fmt.Errorf("rollup block %d of %q: %w", b, s.Key, err))
	}
	dst, err = decodeRollupBlock(dst, raw, s.Kind, rm, sc)
	if err != nil {
		return dst, r.corrupt(rm.Offset, fmt.Errorf("rollup block %d of %q: %w", b, s.Key, err))
	}
	return dst, nil
}

// AddRollups appends rollup buckets to the series key of the given kind
// (float, int or uint). The rollups of a series come before its samples:
// AddRollups must be called before Add or CopyBlock for key, and may be
// called several times, with bucket starts strictly increasing across
// calls. Every bucket must have Count >= 1, Start a multiple of its
// Every > 0, and FirstT <= MinT, MaxT <= LastT inside the bucket.
func (w *Writer) AddRollups(key []byte, kind point.Kind, rs []Rollup) error {
	if err := w.check(key, kind, nil); err != nil {
		return err
	}
	if !rollupKind(kind) {
		return fmt.Errorf("%w: segment: rollups of %q: kind %v", base.ErrInvalid, key, kind)
	}
	same := w.have && bytes.Equal(key, w.key)
	if same && (len(w.blocks) > 0 || len(w.times) > 0) {
		return fmt.Errorf("%w: segment: rollups of %q after its samples", base.ErrInvalid, key)
	}
	prevStart, prevLast, havePrev := int64(0), int64(0), same && len(w.rollups) > 0
	if havePrev {
		prevStart, prevLast = w.rollupLastStart, w.rollupLastT
	}
	for i := range rs {
		r := &rs[i]
		switch {
		case r.Every <= 0 || r.Start%r.Every != 0 || r.Start > math.MaxInt64-r.Every+1:
			return fmt.Errorf("%w: segment: rollup %d of %q: start %d, every %d", base.ErrInvalid, i, key, r.Start, r.Every)
		case r.Count < 1:
			return fmt.Errorf("%w: segment: rollup %d of %q: count %d", base.ErrInvalid, i, key, r.Count)
		case havePrev && (r.Start <= prevStart || r.FirstT <= prevLast):
			return fmt.Errorf("%w: segment: rollup %d of %q at %d not after %d", base.ErrInvalid, i, key, r.Start, prevStart)
		case r.FirstT < r.Start || r.LastT >= r.Start+r.Every || r.FirstT > r.LastT ||
			r.MinT < r.FirstT || r.MinT > r.LastT || r.MaxT < r.FirstT || r.MaxT > r.LastT:
			return fmt.Errorf("%w: segment: rollup %d of %q: times out of its bucket", base.ErrInvalid, i, key)
		case r.First.Kind() != kind || r.Last.Kind() != kind || r.Min.Kind() != kind || r.Max.Kind() != kind:
			return fmt.Errorf("%w: segment: rollup %d of %q: values not %v", base.ErrInvalid, i, key, kind)
		}
		prevStart, prevLast, havePrev = r.Start, r.LastT, true
	}
	if len(rs) == 0 {
		return nil
	}
	if !same {
		if err := w.endSeries(); err != nil {
			return err
		}
		w.key = append(w.key[:0], key...)
		w.kind = kind
		w.have = true
		w.lastTime = math.MinInt64 // samples need not follow the buckets
	}
	for len(rs) > 0 {
		// One block per run of one Every, at most BlockSamples buckets,
		// and none across a UTC day: a daily query bucket then holds
		// whole blocks, folded from their summaries.
		n := 1
		for n < len(rs) && n < w.opts.BlockSamples && rs[n].Every == rs[0].Every && !crossesDay(rs[n-1].Start, rs[n].Start) {
			n++
		}
		chunk := rs[:n]
		rs = rs[n:]
		rm := RollupMeta{Offset: w.dataSize(), Every: chunk[0].Every, MinTime: chunk[0].Start, MaxTime: math.MinInt64, Count: n}
		for i := range chunk {
			rm.MaxTime = max(rm.MaxTime, chunk[i].LastT)
		}
		raw := appendRollupBlock(w.scratch.raw[:0], kind, rm.Every, chunk, &w.scratch)
		w.scratch.raw = raw
		start := len(w.buf)
		w.buf = appendFramed(w.buf, w.enc, raw)
		rm.Length = uint32(len(w.buf) - start)
		rm.Summary = summarize(chunk)
		if raw, ok := appendRollupHours(w.scratch.raw[:0], kind, chunk); ok {
			w.scratch.raw = raw
			start := len(w.buf)
			w.buf = appendFramed(w.buf, w.enc, raw)
			rm.HoursLength = uint32(len(w.buf) - start)
		}
		w.rollups = append(w.rollups, rm)
		w.rollupLastStart, w.rollupLastT = chunk[n-1].Start, chunk[n-1].LastT
		w.meta.Samples += int64(n)
		if len(w.buf) >= writeBufferSize {
			if err := w.writeOut(); err != nil {
				return err
			}
		}
	}
	return nil
}

// appendRollupEntries appends the rollup section of a format 4 series
// entry; hours says whether its entries carry an hours length.
func appendRollupEntries(dst []byte, kind point.Kind, rms []RollupMeta, hours bool) []byte {
	dst = encoding.AppendUvarint(dst, uint64(len(rms)))
	for i := range rms {
		r := &rms[i]
		dst = encoding.AppendUvarint(dst, uint64(r.Length))
		dst = encoding.AppendUvarint(dst, uint64(r.Every))
		dst = encoding.AppendVarint(dst, r.MinTime)
		dst = encoding.AppendUvarint(dst, uint64(r.MaxTime-r.MinTime))
		dst = encoding.AppendUvarint(dst, uint64(r.Count))
		if r.Summary != nil {
			dst = appendRollupSummary(dst, kind, r)
		}
		if hours {
			dst = encoding.AppendUvarint(dst, uint64(r.HoursLength))
		}
	}
	return dst
}

// hasHours reports whether any of the rollup blocks rms has hours.
func hasHours(rms []RollupMeta) bool {
	for i := range rms {
		if rms[i].HoursLength != 0 {
			return true
		}
	}
	return false
}

// minRollupEntry is the smallest encoded rollup entry.
const minRollupEntry = 5

// parseRollupEntries decodes the rollup section of a series entry,
// assigning offsets from off, and returns where the series' sample blocks
// start.
func parseRollupEntries(c *decbuf.Decbuf, kind point.Kind, summaries, hours bool, off, dataEnd int64, s *SeriesIndex) (int64, error) {
	n := c.Uvarint("rollup count")
	if c.Err() != nil {
		return 0, c.Err()
	}
	if !rollupKind(kind) {
		return 0, fmt.Errorf("rollups of a %v series", kind)
	}
	if n == 0 || n > uint64(c.Len()/minRollupEntry) {
		return 0, fmt.Errorf("%d rollup blocks in %d bytes", n, c.Len())
	}
	rms := s.Rollups[:0]
	for j := range int(n) {
		var rm RollupMeta
		length := c.Uvarint("length")
		every := c.Uvarint("every")
		rm.MinTime = c.Varint("min time")
		span := c.Uvarint("span")
		count := c.Uvarint("count")
		if c.Err() != nil {
			return 0, c.Err()
		}
		switch {
		case length < minBlockLen || length > math.MaxUint32:
			return 0, fmt.Errorf("rollup block %d: length %d", j, length)
		case every == 0 || every > math.MaxInt64:
			return 0, fmt.Errorf("rollup block %d: every %d", j, every)
		case count == 0 || count > MaxBlockSamples:
			return 0, fmt.Errorf("rollup block %d: count %d", j, count)
		case span > math.MaxInt64 || rm.MinTime > math.MaxInt64-int64(span):
			return 0, fmt.Errorf("rollup block %d: span %d", j, span)
		case int64(length) > dataEnd-off:
			return 0, fmt.Errorf("rollup block %d: %d bytes at %d overrun the data ending at %d", j, length, off, dataEnd)
		}
		rm.MaxTime = rm.MinTime + int64(span)
		if j > 0 && rm.MinTime <= rms[j-1].MinTime {
			return 0, fmt.Errorf("rollup block %d starts at %d, not after %d", j, rm.MinTime, rms[j-1].MinTime)
		}
		rm.Every, rm.Count, rm.Length, rm.Offset = int64(every), int(count), uint32(length), off
		if summaries {
			if err := parseRollupSummary(c, kind, &rm); err != nil {
				return 0, fmt.Errorf("rollup block %d: %w", j, err)
			}
		}
		off += int64(length)
		if hours {
			hl := c.Uvarint("hours length")
			switch {
			case c.Err() != nil:
				return 0, c.Err()
			case hl != 0 && (hl < minBlockLen || hl > math.MaxUint32 || rm.Count < 2):
				return 0, fmt.Errorf("rollup block %d: hours length %d", j, hl)
			case int64(hl) > dataEnd-off:
				return 0, fmt.Errorf("rollup block %d: hours of %d bytes at %d overrun the data ending at %d", j, hl, off, dataEnd)
			}
			rm.HoursLength = uint32(hl)
			off += int64(hl)
		}
		rms = append(rms, rm)
	}
	s.Rollups = rms
	return off, nil
}

// rollupDay is the span no rollup block crosses.
const rollupDay = 24 * 3600 * 1e9

// crossesDay reports whether bucket starts a < b lie in different UTC days.
func crossesDay(a, b int64) bool {
	da, db := a/rollupDay, b/rollupDay
	if a%rollupDay < 0 {
		da--
	}
	if b%rollupDay < 0 {
		db--
	}
	return da != db
}
