package segment

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/stratadb/strata/internal/encoding"
	"github.com/stratadb/strata/internal/point"
)

// byteSource hands out fuzz input; it yields zeros once exhausted.
type byteSource struct{ b []byte }

func (s *byteSource) byte() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *byteSource) u64() uint64 {
	var buf [8]byte
	n := copy(buf[:], s.b)
	s.b = s.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

// seriesFromBytes builds up to 8 sorted series from fuzz input: a block
// size, then per series a kind, a sample count, a start time and, per
// sample, a time step and a value of the series' kind.
func seriesFromBytes(data []byte) (int, []testSeries) {
	src := &byteSource{b: data}
	bs := 1 + int(src.byte()%32)
	nseries := 1 + int(src.byte()%8)
	var out []testSeries
	for i := range nseries {
		if len(src.b) == 0 && i > 0 {
			break
		}
		h := src.byte()
		kind := point.Kind(1 + h%5)
		n := 1 + int(src.byte()%64)
		t := int64(src.u64())
		s := testSeries{key: []byte{'m', ' ', 'a' + byte(i)}, kind: kind}
		for j := range n {
			if j > 0 {
				var step uint64
				switch c := src.byte(); {
				case c < 200:
					step = uint64(c) + 1
				case c < 250:
					step = uint64(c) << 30
				default:
					step = src.u64()>>1 + 1
				}
				next := t + int64(step)
				if next <= t { // past MaxInt64: end the series
					break
				}
				t = next
			}
			var v point.Value
			switch kind {
			case point.KindFloat:
				if h&0x80 != 0 {
					v = point.Float(math.Float64frombits(src.u64()))
				} else {
					v = point.Float(float64(int16(binary.LittleEndian.Uint16([]byte{src.byte(), src.byte()}))) / 100)
				}
			case point.KindInt:
				v = point.Int(int64(src.u64()))
			case point.KindUint:
				v = point.Uint(src.u64())
			case point.KindBool:
				v = point.Bool(src.byte()&1 == 1)
			case point.KindString:
				l := int(src.byte() % 40)
				str := make([]byte, l)
				for k := range str {
					str[k] = src.byte()
				}
				v = point.String(string(str))
			}
			s.samples = append(s.samples, point.Sample{Time: t, Value: v})
		}
		out = append(out, s)
	}
	return bs, out
}

// FuzzSegmentRoundTrip writes series derived from the input and checks
// that the same samples and correct stats come back.
func FuzzSegmentRoundTrip(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		bs, series := seriesFromBytes(data)
		fs := newMemFS()
		writeSegment(t, fs, "/db/f.seg", bs, series)
		r := openAndCheck(t, fs, "/db/f.seg", series)
		checkStats(t, r)
	})
}

// FuzzParseIndex feeds arbitrary bytes to the index parser, past the
// checksum that guards it in a file: it must fail cleanly or return a
// consistent index.
func FuzzParseIndex(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, version := range []byte{1, 2, 3, 4} {
			for _, dataEnd := range []int64{headerLen, 1 << 40} {
				tab, err := parseIndex(raw, version, headerLen, dataEnd)
				if err != nil {
					continue
				}
				var prev *SeriesIndex
				for i := range tab.len() {
					s := tab.entry(i)
					if len(s.Blocks)+len(s.Rollups) == 0 || !s.Kind.Valid() || (prev != nil && string(s.Key) <= string(prev.Key)) || string(tab.key(i)) != string(s.Key) {
						t.Fatalf("series %d inconsistent", i)
					}
					for j, b := range s.Blocks {
						if b.Count < 1 || b.Count > MaxBlockSamples || b.MaxTime < b.MinTime || (j > 0 && b.MinTime <= s.Blocks[j-1].MaxTime) {
							t.Fatalf("series %d block %d inconsistent: %+v", i, j, b)
						}
					}
					for j, b := range s.Rollups {
						if b.Count < 1 || b.Count > MaxBlockSamples || b.MaxTime < b.MinTime || b.Every < 1 || (j > 0 && b.MinTime <= s.Rollups[j-1].MinTime) {
							t.Fatalf("series %d rollup block %d inconsistent: %+v", i, j, b)
						}
						if m := b.Summary; m != nil && (m.Count < int64(b.Count) || m.FirstT < b.MinTime || m.FirstT > m.MinT || m.FirstT > m.MaxT || m.MinT > b.MaxTime || m.MaxT > b.MaxTime) {
							t.Fatalf("series %d rollup block %d summary inconsistent: %+v", i, j, *m)
						}
					}
					prev = s
				}
			}
		}
	})
}

// FuzzDecodeBlock feeds arbitrary bytes to the block decoder, past the
// checksum, with an index entry taken from the bytes themselves so that
// decoding gets to the value columns.
func FuzzDecodeBlock(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) < 3 {
			return
		}
		kind := point.Kind(raw[0])
		count, rest, err := encoding.Uvarint(raw[1:])
		if err != nil || count == 0 || count > MaxBlockSamples || !kind.Valid() {
			return
		}
		tsLen, rest, err := encoding.Uvarint(rest)
		if err != nil || tsLen > uint64(len(rest)) {
			return
		}
		ts, _, err := encoding.DecodeTimestamps(nil, rest[:tsLen], int(count))
		if err != nil {
			return
		}
		bm := &BlockMeta{Count: int(count), MinTime: ts[0], MaxTime: ts[len(ts)-1]}
		var sc blockScratch
		samples, err := decodeBlock(nil, raw, kind, bm, &sc)
		// The column decoder must agree: the same samples or an error,
		// and on error its columns as they were.
		ts0 := []int64{7}
		cts, vals, strs, cerr := decodeColumns(ts0, nil, nil, raw, kind, bm)
		if (err == nil) != (cerr == nil) {
			t.Fatalf("decodeBlock: %v, decodeColumns: %v", err, cerr)
		}
		if err != nil {
			if len(cts) != 1 || len(vals) != 0 || len(strs) != 0 {
				t.Fatalf("failed decodeColumns left %d times, %d values, %d strings", len(cts), len(vals), len(strs))
			}
			return
		}
		cols := point.Columns{Times: cts[1:], Bits: vals, Strings: strs}
		if got := cols.Samples(kind); !slices.Equal(got, samples) {
			t.Fatalf("decodeColumns: %v, decodeBlock: %v", got, samples)
		}
		if len(samples) != bm.Count {
			t.Fatalf("%d samples, want %d", len(samples), bm.Count)
		}
		for i, s := range samples {
			if s.Value.Kind() != kind || (i > 0 && s.Time <= samples[i-1].Time) {
				t.Fatalf("sample %d: %v", i, s)
			}
		}
	})
}
