package encoding

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestBitWriterReaderRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 200 {
		type item struct {
			v  uint64
			nb uint
		}
		var items []item
		prefix := []byte{0xAB, 0xCD}
		w := NewBitWriter(prefix)
		total := 0
		for range rng.IntN(300) {
			nb := uint(rng.IntN(65))
			v := rng.Uint64()
			if nb < 64 {
				v &= 1<<nb - 1
			}
			items = append(items, item{v, nb})
			w.WriteBits(v, nb)
			total += int(nb)
		}
		if got := w.Len(); got != 16+total {
			t.Fatalf("iter %d: Len = %d, want %d", iter, got, 16+total)
		}
		buf := w.Finish()
		if len(buf) != 2+(total+7)/8 {
			t.Fatalf("iter %d: %d bytes for %d bits", iter, len(buf), total)
		}
		if buf[0] != 0xAB || buf[1] != 0xCD {
			t.Fatalf("iter %d: prefix overwritten", iter)
		}
		buf = append(buf, 0x5A) // a trailing byte Rest must return
		r := NewBitReader(buf[2:])
		for i, it := range items {
			if got := r.ReadBits(it.nb); got != it.v {
				t.Fatalf("iter %d item %d: got %#x want %#x (%d bits)", iter, i, got, it.v, it.nb)
			}
		}
		if err := r.Err(); err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		if rest := r.Rest(); len(rest) != 1 || rest[0] != 0x5A {
			t.Fatalf("iter %d: Rest = %x", iter, rest)
		}
	}
}

func TestBitReaderPastEnd(t *testing.T) {
	r := NewBitReader([]byte{0xFF})
	if v := r.ReadBits(4); v != 0xF {
		t.Fatalf("got %x", v)
	}
	if r.Err() != nil {
		t.Fatal("error before the end")
	}
	if v := r.ReadBits(8); v != 0xF0 {
		t.Fatalf("got %x, want the 4 remaining bits then zeros", v)
	}
	if err := r.Err(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Err = %v, want ErrMalformed", err)
	}
	if r.ReadBit() {
		t.Fatal("bit past the end is set")
	}
	if r.Rest() != nil {
		t.Fatal("Rest after overrun")
	}
	var empty BitReader
	if empty.ReadBit() || empty.Err() == nil {
		t.Fatal("empty reader")
	}
}

func TestZigzag(t *testing.T) {
	cases := []struct {
		v int64
		u uint64
	}{{0, 0}, {-1, 1}, {1, 2}, {-2, 3}, {1<<63 - 1, 1<<64 - 2}, {-1 << 63, 1<<64 - 1}}
	for _, c := range cases {
		if got := Zigzag(c.v); got != c.u {
			t.Errorf("Zigzag(%d) = %d, want %d", c.v, got, c.u)
		}
		if got := Unzigzag(c.u); got != c.v {
			t.Errorf("Unzigzag(%d) = %d, want %d", c.u, got, c.v)
		}
	}
}

func TestVarint(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 1 << 40, -1 << 63, 1<<63 - 1} {
		b := AppendVarint([]byte{9}, v)
		got, rest, err := Varint(b[1:])
		if err != nil || got != v || len(rest) != 0 {
			t.Fatalf("Varint(%d) = %d, %x, %v", v, got, rest, err)
		}
	}
	if _, _, err := Uvarint(nil); !errors.Is(err, ErrMalformed) {
		t.Fatalf("empty: %v", err)
	}
	if _, _, err := Uvarint([]byte{0x80, 0x80}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated: %v", err)
	}
	over := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}
	if _, _, err := Uvarint(over); !errors.Is(err, ErrMalformed) {
		t.Fatalf("overflow: %v", err)
	}
}
