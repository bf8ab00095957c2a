package catalog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stratadb/strata/internal/point"
)

// TestCatalogRecordChunks: a record compressed a chunk at a time decodes
// to exactly the entries of its series, for chunks of any size and
// records ending on either side of a chunk's end; a record of one chunk
// is the single frame the whole entries compress to, byte for byte; and
// the frames of 256 KiB chunks cost little against one frame.
func TestCatalogRecordChunks(t *testing.T) {
	defer func(n int) { catalogChunk = n }(catalogChunk)
	keys := catalogKeys(5000)
	c := New()
	for _, k := range keys {
		c.add(k, point.KindFloat)
	}
	enc, err := catalogEncoder()
	if err != nil {
		t.Fatal(err)
	}
	check := func(from, to int) []byte {
		t.Helper()
		entries := c.appendCatalogEntries(nil, from, to)
		p, err := c.appendCatalogRecord([]byte("hdr"), from, to)
		if err != nil {
			t.Fatal(err)
		}
		if string(p[:3]) != "hdr" {
			t.Fatalf("the payload overwrote what dst held")
		}
		p = p[3:]
		got, err := catalogRecordEntries(p, 2)
		if err != nil {
			t.Fatalf("chunk %d, series [%d, %d): %v", catalogChunk, from, to, err)
		}
		if !bytes.Equal(got, entries) {
			t.Fatalf("chunk %d, series [%d, %d): the record decodes to other entries", catalogChunk, from, to)
		}
		if len(entries) >= catalogMinCompress && catalogChunk >= 1000 && p[0] != catalogZstd {
			t.Fatalf("chunk %d, series [%d, %d): %d bytes of entries stored raw", catalogChunk, from, to, len(entries))
		}
		if len(entries) <= catalogChunk && p[0] == catalogZstd {
			_, n := binary.Uvarint(p[1:])
			if want := enc.EncodeAll(entries, nil); !bytes.Equal(p[1+n:], want) {
				t.Fatalf("chunk %d, series [%d, %d): one chunk is not the one frame of the entries", catalogChunk, from, to)
			}
		}
		return p
	}
	for _, chunk := range []int{1, 50, 1000, 4 << 10, 256 << 10} {
		catalogChunk = chunk
		for _, r := range [][2]int{{0, 1}, {0, 5}, {3, 40}, {0, 4999}, {0, 5000}, {17, 2017}} {
			check(r[0], r[1])
		}
		// Records of the entries just below, at and just past one chunk.
		from := 100
		for to := from + 1; to < len(keys); to++ {
			if n := len(c.appendCatalogEntries(nil, from, to)); n >= chunk-100 {
				for k := to; k < min(to+4, len(keys)); k++ {
					check(from, k)
				}
				break
			}
		}
	}
	catalogChunk = 256 << 10
	many := catalogKeys(60000)
	big := New()
	for _, k := range many {
		big.add(k, point.KindFloat)
	}
	p, err := big.appendCatalogRecord(nil, 0, len(many))
	if err != nil {
		t.Fatal(err)
	}
	entries := big.appendCatalogEntries(nil, 0, len(many))
	if len(entries) < 2*catalogChunk {
		t.Fatalf("%d bytes of entries: fewer than two chunks", len(entries))
	}
	one := enc.EncodeAll(entries, nil)
	if len(p) > len(one)*21/20+64 {
		t.Errorf("chunked record of %d bytes, one frame %d", len(p), len(one))
	}
	t.Logf("%d bytes of entries: chunked %d, one frame %d", len(entries), len(p), len(one))
}

// TestCatalogRecordIncompressible: entries that do not compress are
// stored raw, whole, though compressed chunk by chunk first.
func TestCatalogRecordIncompressible(t *testing.T) {
	defer func(n int) { catalogChunk = n }(catalogChunk)
	catalogChunk = 512
	c := New()
	var x uint64 = 88172645463325252
	for i := range 300 {
		b := fmt.Appendf(nil, "m%03d,k=", i)
		for len(b) < 400 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			if y := byte(x >> 56); y != ' ' && y != ',' && y != '=' && y != '\\' {
				b = append(b, y)
			}
		}
		c.add(string(b)+" f", point.KindInt)
	}
	p, err := c.appendCatalogRecord(nil, 0, 300)
	if err != nil {
		t.Fatal(err)
	}
	if entries := c.appendCatalogEntries(nil, 0, 300); p[0] != catalogRaw || !bytes.Equal(p[1:], entries) {
		t.Fatalf("codec %d, %d bytes: not the raw %d bytes of entries", p[0], len(p), len(entries))
	}
}
