package segment

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/stratadb/strata/internal/point"
)

// TestSectionBufChunks: whatever the sizes of the writes and of the
// chunks, a sectionBuf holds exactly the bytes written, in order, with
// every chunk but the last full, and so again after a reset reuses its
// chunks.
func TestSectionBufChunks(t *testing.T) {
	defer func(n int) { sectionChunkLen = n }(sectionChunkLen)
	rng := rand.New(rand.NewPCG(5, 3))
	for _, chunk := range []int{1, 7, 64, 4 << 10} {
		sectionChunkLen = chunk
		s := &sectionBuf{}
		for round := range 3 {
			s.reset()
			var want []byte
			for range 1 + rng.IntN(40) {
				p := make([]byte, rng.IntN(3*chunk+2))
				for i := range p {
					p[i] = byte(rng.Uint32())
				}
				if n, err := s.Write(p); n != len(p) || err != nil {
					t.Fatalf("Write of %d bytes: %d, %v", len(p), n, err)
				}
				want = append(want, p...)
			}
			if s.n != len(want) {
				t.Fatalf("chunk %d round %d: n = %d, want %d", chunk, round, s.n, len(want))
			}
			if len(want) > 0 && !bytes.Equal(s.bytes(), want) {
				t.Fatalf("chunk %d round %d: bytes differ", chunk, round)
			}
			if got, w := s.crc(0), crc32.Checksum(want, castagnoli); got != w {
				t.Fatalf("chunk %d round %d: crc %08x, want %08x", chunk, round, got, w)
			}
			for i, c := range s.chunks[:max(s.used-1, 0)] {
				if len(c) != cap(c) {
					t.Fatalf("chunk %d round %d: chunk %d of %d holds %d of %d bytes", chunk, round, i, s.used, len(c), cap(c))
				}
			}
		}
	}
}

// TestStreamedIndexChunked: the compressed index collected in chunks of
// any size gives the file that one buffer gave, byte for byte, read back
// exactly, whether it is written compressed or recovered raw from the
// stream (too compressible, or incompressible), for sizes around the
// chunk boundaries.
func TestStreamedIndexChunked(t *testing.T) {
	defer func(at, n int) { indexStreamAt, sectionChunkLen = at, n }(indexStreamAt, sectionChunkLen)
	rng := rand.New(rand.NewPCG(17, 4))
	noisy := func(n int) []testSeries {
		out := make([]testSeries, n)
		for i := range out {
			key := make([]byte, 40)
			for j := range key {
				key[j] = byte(rng.Uint32())
			}
			key[0], key[1] = byte(i>>8), byte(i)
			out[i] = testSeries{key: key, kind: point.KindString, samples: []point.Sample{{Time: rng.Int64(), Value: point.String("v")}}}
		}
		return out
	}
	cases := []struct {
		name   string
		series []testSeries
	}{
		{"compressible", randomSeries(rng, 600, 30)},
		{"too compressible", repetitiveSeries(600)},
		{"incompressible", noisy(400)},
	}
	for _, tc := range cases {
		indexStreamAt = 4 << 10
		write := func(name string, chunk int) []byte {
			sectionChunkLen = chunk
			fs := newMemFS()
			w := writeStreamed(t, name, WriterOptions{FS: fs, BlockSamples: 8, Series: len(tc.series)}, tc.series)
			if _, err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			openAndCheck(t, fs, name, tc.series)
			return fs.bytes(t, name)
		}
		want := write("one.seg", 1<<20)
		// The compressed stream spans several chunks of every size below.
		if ft, err := parseFooter(want[len(want)-footerLen:], formatVersion); err != nil {
			t.Fatal(err)
		} else if want[ft.indexOff]&flagZstd != 0 && ft.indexLen < 3*4<<10 {
			t.Fatalf("%s: compressed index of %d bytes: too small to test", tc.name, ft.indexLen)
		}
		for _, chunk := range []int{1, 3, 1000, 4 << 10} {
			if got := write("chunked.seg", chunk); !bytes.Equal(got, want) {
				t.Fatalf("%s: chunks of %d bytes give another file (%d bytes, want %d)", tc.name, chunk, len(got), len(want))
			}
		}
	}
}
