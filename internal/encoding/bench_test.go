package encoding

import (
	"fmt"
	"math"
	"testing"

	"github.com/stratadb/strata/internal/testutil"
)

// iotBlock returns a block of 1,000 samples of one series of the IoT
// baseline (testutil.IoTWalk).
func iotBlock() ([]int64, []uint64) {
	w := testutil.NewIoTWalk(1)
	ts := make([]int64, 1000)
	vals := make([]uint64, 1000)
	for i := range ts {
		t, v := w.Next()
		ts[i], vals[i] = t, math.Float64bits(v[0])
	}
	return ts, vals
}

func report(b *testing.B, n, size int) {
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "values/s")
	b.ReportMetric(float64(size)/float64(n), "B/value")
}

func BenchmarkTimestamps(b *testing.B) {
	ts, _ := iotBlock()
	enc := AppendTimestamps(nil, ts)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		var dst []byte
		for b.Loop() {
			dst = AppendTimestamps(dst[:0], ts)
		}
		report(b, len(ts), len(enc))
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		dst := make([]int64, 0, len(ts))
		for b.Loop() {
			dst, _, _ = DecodeTimestamps(dst[:0], enc, len(ts))
		}
		report(b, len(ts), len(enc))
	})
}

func BenchmarkFloats(b *testing.B) {
	_, vals := iotBlock()
	gor := AppendFloats(nil, vals)
	dec, _ := AppendDecimal(nil, vals)
	b.Run("gorilla/encode", func(b *testing.B) {
		b.ReportAllocs()
		var dst []byte
		for b.Loop() {
			dst = AppendFloats(dst[:0], vals)
		}
		report(b, len(vals), len(gor))
	})
	b.Run("gorilla/decode", func(b *testing.B) {
		b.ReportAllocs()
		dst := make([]uint64, 0, len(vals))
		for b.Loop() {
			dst, _, _ = DecodeFloats(dst[:0], gor, len(vals))
		}
		report(b, len(vals), len(gor))
	})
	b.Run("decimal/encode", func(b *testing.B) {
		b.ReportAllocs()
		var dst []byte
		for b.Loop() {
			dst, _ = AppendDecimal(dst[:0], vals)
		}
		report(b, len(vals), len(dec))
	})
	b.Run("decimal/decode", func(b *testing.B) {
		b.ReportAllocs()
		dst := make([]uint64, 0, len(vals))
		for b.Loop() {
			dst, _, _ = DecodeDecimal(dst[:0], dec, len(vals))
		}
		report(b, len(vals), len(dec))
	})
}

// BenchmarkDecodePacked decodes one chunk of PackedChunk values of each
// width; the widths of at most 8 bits take the eight-at-a-time path.
func BenchmarkDecodePacked(b *testing.B) {
	for _, w := range []int{1, 3, 6, 8, 12, 24} {
		vals := make([]uint64, PackedChunk)
		for i := range vals {
			vals[i] = uint64(i) * 2654435761 & (1<<w - 1)
		}
		enc := AppendPacked(nil, vals)
		b.Run(fmt.Sprintf("w=%d", w), func(b *testing.B) {
			b.ReportAllocs()
			dst := make([]uint64, 0, len(vals))
			for b.Loop() {
				dst, _, _ = DecodePacked(dst[:0], enc, len(vals))
			}
			report(b, len(vals), len(enc))
		})
	}
}
