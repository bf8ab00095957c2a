package segment

// Rollup block summaries (format 4, optional): a series entry whose kind
// byte has bit 6 set as well as bit 7 (kind | 0xC0) follows each rollup
// entry's count with the statistics of the whole block, so that a reader
// folds a block that lies wholly inside one query bucket without reading
// it:
//
//	rollup entry with a summary:
//	+-------------+-----------------+---------------------+-------------------+-------------------+--------------------------+-----+
//	| rollup entry| samples uvarint | firstT-min uvarint  | minT-min uvarint  | maxT-min uvarint  | first,last,min,max (8x4) | sum |
//	+-------------+-----------------+---------------------+-------------------+-------------------+--------------------------+-----+
//
//	samples   the samples the block's buckets reduce, >= the bucket count
//	times     minus the entry's minTime, each <= span (lastT is
//	          minTime+span); firstT <= minT, maxT
//	values    little-endian bits of the series' kind
//	sum       float: the exact sum (xsum.Acc AppendBinary, self-delimiting);
//	          int, uint: the 128-bit sum's high 64 bits varint, then its
//	          low 64 bits uvarint
//
// Entries without the bit (files written before summaries) read as before
// and their blocks are folded bucket by bucket.

import (
	"encoding/binary"
	"fmt"

	"github.com/stratadb/strata/internal/decbuf"
	"github.com/stratadb/strata/internal/encoding"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/xsum"
)

const kindRollupSummaries = 0x40 // bit of a format 4 series entry's kind byte, with kindHasRollups

// RollupSummary is the statistics of a whole rollup block. Its last sample
// is at the block's MaxTime.
type RollupSummary struct {
	Count       int64  // samples
	SumF        []byte // float series: the exact sum, xsum.Acc's encoding
	SumI        Int128 // int and uint series: the exact sum
	First, Last point.Value
	Min, Max    point.Value
	FirstT      int64
	MinT, MaxT  int64 // time of the earliest sample holding Min (Max)
}

// summarize returns the statistics of buckets rs (in time order).
func summarize(rs []Rollup) *RollupSummary {
	s := &RollupSummary{First: rs[0].First, FirstT: rs[0].FirstT, Min: rs[0].Min, MinT: rs[0].MinT, Max: rs[0].Max, MaxT: rs[0].MaxT}
	var acc xsum.Acc
	for i := range rs {
		r := &rs[i]
		s.Count += r.Count
		s.Last = r.Last
		if r.First.Kind() == point.KindFloat {
			acc.Merge(&r.SumF)
		} else {
			lo := s.SumI.Lo + r.SumI.Lo
			c := int64(0)
			if lo < s.SumI.Lo {
				c = 1
			}
			s.SumI = Int128{Hi: s.SumI.Hi + r.SumI.Hi + c, Lo: lo}
		}
		if i == 0 {
			continue
		}
		// The earliest time wins a tie, as a reader folding bucket by
		// bucket keeps it.
		if c := point.Compare(r.Min, s.Min); c < 0 || (c == 0 && r.MinT < s.MinT) {
			s.Min, s.MinT = r.Min, r.MinT
		}
		if c := point.Compare(r.Max, s.Max); c > 0 || (c == 0 && r.MaxT < s.MaxT) {
			s.Max, s.MaxT = r.Max, r.MaxT
		}
	}
	if rs[0].First.Kind() == point.KindFloat {
		s.SumF = acc.AppendBinary(nil)
	}
	return s
}

// appendRollupSummary appends the summary of rollup entry rm.
func appendRollupSummary(dst []byte, kind point.Kind, rm *RollupMeta) []byte {
	s := rm.Summary
	dst = encoding.AppendUvarint(dst, uint64(s.Count))
	dst = encoding.AppendUvarint(dst, uint64(s.FirstT-rm.MinTime))
	dst = encoding.AppendUvarint(dst, uint64(s.MinT-rm.MinTime))
	dst = encoding.AppendUvarint(dst, uint64(s.MaxT-rm.MinTime))
	for _, v := range []point.Value{s.First, s.Last, s.Min, s.Max} {
		dst = binary.LittleEndian.AppendUint64(dst, v.Bits())
	}
	if kind == point.KindFloat {
		return append(dst, s.SumF...)
	}
	dst = encoding.AppendVarint(dst, s.SumI.Hi)
	return encoding.AppendUvarint(dst, s.SumI.Lo)
}

// parseRollupSummary decodes and checks the summary of rollup entry rm.
func parseRollupSummary(c *decbuf.Decbuf, kind point.Kind, rm *RollupMeta) error {
	s := &RollupSummary{}
	s.Count = int64(c.Uvarint("samples") & (1<<63 - 1))
	span := uint64(rm.MaxTime - rm.MinTime)
	fT, mnT, mxT := c.Uvarint("first time"), c.Uvarint("min time"), c.Uvarint("max time")
	var vs [4]point.Value
	for i := range vs {
		vs[i] = point.FromBits(kind, c.Uint64("value"))
	}
	if c.Err() != nil {
		return c.Err()
	}
	switch {
	case s.Count < int64(rm.Count):
		return fmt.Errorf("summary of %d samples in %d buckets", s.Count, rm.Count)
	case fT > span || mnT > span || mxT > span || fT > mnT || fT > mxT:
		return fmt.Errorf("summary times %d, %d, %d out of span %d", fT, mnT, mxT, span)
	}
	s.FirstT, s.MinT, s.MaxT = rm.MinTime+int64(fT), rm.MinTime+int64(mnT), rm.MinTime+int64(mxT)
	s.First, s.Last, s.Min, s.Max = vs[0], vs[1], vs[2], vs[3]
	if kind == point.KindFloat {
		n, err := xsum.EncodedLen(c.Rest())
		if err != nil {
			return fmt.Errorf("summary sum: %w", err)
		}
		s.SumF = append([]byte(nil), c.Bytes(uint64(n), "sum")...)
	} else {
		s.SumI.Hi = c.Varint("sum")
		s.SumI.Lo = c.Uvarint("sum")
	}
	if c.Err() != nil {
		return c.Err()
	}
	rm.Summary = s
	return nil
}
