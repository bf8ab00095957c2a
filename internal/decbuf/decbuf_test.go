package decbuf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var b []byte
	b = binary.AppendUvarint(b, math.MaxUint64)
	b = binary.AppendVarint(b, math.MinInt64)
	b = append(b, 7)
	b = binary.LittleEndian.AppendUint32(b, 0xdeadbeef)
	b = binary.LittleEndian.AppendUint64(b, 1<<63+5)
	b = binary.AppendUvarint(b, 3)
	b = append(b, "abc"...)
	b = binary.AppendUvarint(b, 2)
	b = append(b, 1, 2)

	d := New(b)
	if v := d.Uvarint("u"); v != math.MaxUint64 {
		t.Fatalf("uvarint %d", v)
	}
	if v := d.Varint("v"); v != math.MinInt64 {
		t.Fatalf("varint %d", v)
	}
	if v := d.Byte("b"); v != 7 {
		t.Fatalf("byte %d", v)
	}
	if v := d.Uint32("u32"); v != 0xdeadbeef {
		t.Fatalf("uint32 %x", v)
	}
	if v := d.Uint64("u64"); v != 1<<63+5 {
		t.Fatalf("uint64 %x", v)
	}
	if v := d.UvarintStr("s"); v != "abc" {
		t.Fatalf("str %q", v)
	}
	if n := d.Count("n", 1); n != 2 {
		t.Fatalf("count %d", n)
	}
	if v := d.Bytes(2, "x"); !bytes.Equal(v, []byte{1, 2}) || cap(v) != 2 {
		t.Fatalf("bytes %v cap %d", v, cap(v))
	}
	d.End("all")
	if d.Err() != nil || d.Len() != 0 || d.Offset() != len(b) {
		t.Fatalf("err %v len %d off %d", d.Err(), d.Len(), d.Offset())
	}
}

func TestFailuresStick(t *testing.T) {
	f := func(name string, b []byte, read func(d *Decbuf)) {
		t.Helper()
		d := New(b)
		read(&d)
		if !errors.Is(d.Err(), ErrMalformed) {
			t.Fatalf("%s: err %v, want ErrMalformed", name, d.Err())
		}
		first := d.Err()
		if d.Uvarint("after") != 0 || d.Byte("after") != 0 || d.UvarintStr("after") != "" || d.Err() != first {
			t.Fatalf("%s: reads after a failure return values or change the error", name)
		}
	}
	f("empty uvarint", nil, func(d *Decbuf) { d.Uvarint("x") })
	f("overlong uvarint", bytes.Repeat([]byte{0xff}, 11), func(d *Decbuf) { d.Uvarint("x") })
	f("short uint64", []byte{1, 2, 3}, func(d *Decbuf) { d.Uint64("x") })
	f("short uint32", []byte{1, 2, 3}, func(d *Decbuf) { d.Uint32("x") })
	f("length past end", []byte{5, 'a'}, func(d *Decbuf) { d.UvarintBytes("x") })
	f("huge length", binary.AppendUvarint(nil, math.MaxUint64), func(d *Decbuf) { d.UvarintStr("x") })
	f("count past end", []byte{3, 0, 0}, func(d *Decbuf) { d.Count("x", 2) })
	f("trailing", []byte{1, 2}, func(d *Decbuf) { d.Byte("x"); d.End("rec") })
	f("caller check", []byte{1}, func(d *Decbuf) { d.Failf("bad %d", 1) })
}

// FuzzDecbuf drives a Decbuf with arbitrary reads over arbitrary bytes: it
// must never panic, never return more bytes than are left, and a count it
// accepts must fit in the bytes left.
func FuzzDecbuf(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, []byte{0x05, 0x01, 0x02, 0x03, 'h', 'e', 'l', 'l', 'o'})
	f.Add([]byte{6, 6, 6}, bytes.Repeat([]byte{0xff}, 12))
	f.Add([]byte{4, 5, 7}, []byte{})
	f.Fuzz(func(t *testing.T, ops, data []byte) {
		d := New(data)
		for _, op := range ops {
			left := d.Len()
			switch op % 9 {
			case 0:
				d.Uvarint("u")
			case 1:
				d.Varint("v")
			case 2:
				d.Byte("b")
			case 3:
				d.Uint32("u32")
			case 4:
				d.Uint64("u64")
			case 5:
				if b := d.UvarintBytes("bytes"); len(b) > left {
					t.Fatalf("%d bytes returned from %d left", len(b), left)
				}
			case 6:
				if n := d.Count("count", 3); n*3 > d.Len() {
					t.Fatalf("count %d of 3-byte elements accepted with %d bytes left", n, d.Len())
				}
			case 7:
				d.Bytes(uint64(op), "raw")
			case 8:
				d.End("end")
			}
			if d.Len() > left || d.Offset()+d.Len() > len(data) {
				t.Fatalf("cursor moved back: left %d -> %d, offset %d", left, d.Len(), d.Offset())
			}
			if d.Err() != nil && d.Len() != 0 {
				t.Fatalf("bytes left after a failure")
			}
		}
	})
}
