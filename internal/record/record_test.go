package record

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stratadb/strata/internal/vfs"
)

// The layouts of the three logs, as their packages declare them (a copy:
// those packages import this one).
var layouts = map[string]*Layout{
	// wal: length (4) | type (1) | header crc of [0,5) (4) | crc of [0,9) and payload (4)
	"wal": {HeaderSize: 13, LengthAt: 0, MaxPayload: 256 << 20,
		HeaderCRC: &CRC{At: 5, From: 0, To: 5}, PayloadCRC: CRC{At: 9, From: 0, To: 9},
		Valid: func(h []byte) bool { return h[4] != 0 }},
	// SERIES: length (4) | crc of the payload (4)
	"series": {HeaderSize: 8, LengthAt: 0, MinPayload: 1, MaxPayload: 1 << 30,
		PayloadCRC: CRC{At: 4, From: 0, To: 0}},
	// queue version 2: magic (4) | hcrc of [8,45) (4) | length (4) | fields (29) | pcrc of the payload (4)
	"queue": {Magic: "SFWF", HeaderSize: 45, LengthAt: 8, MaxPayload: 1 << 30,
		HeaderCRC: &CRC{At: 4, From: 8, To: 45}, PayloadCRC: CRC{At: 41, From: 0, To: 0}},
	// queue version 1: length (4) | crc of [8,29) and payload (4) | fields (21)
	"queue1": {HeaderSize: 29, LengthAt: 0, MaxPayload: 1 << 30,
		PayloadCRC: CRC{At: 4, From: 8, To: 29}},
}

// header returns a header for l with its fields (not length or checksums)
// filled from i.
func header(l *Layout, i int) []byte {
	h := make([]byte, l.HeaderSize)
	for k := range h {
		h[k] = byte(i + k + 1)
	}
	copy(h, l.Magic)
	return h
}

func frames(l *Layout, n int) (data []byte, offs []int64) {
	for i := range n {
		offs = append(offs, int64(len(data)))
		data = l.AppendFrame(data, header(l, i), fmt.Appendf(nil, "payload %d %s", i, bytes.Repeat([]byte{'x'}, i)))
	}
	return data, offs
}

// Frames sealed by a layout read back whole, with their header fields.
func TestRoundTrip(t *testing.T) {
	for name, l := range layouts {
		data, offs := frames(l, 20)
		w := Mem(data)
		for i, off := range offs {
			f, bad, err := l.Read(w, off)
			if err != nil || bad != OK {
				t.Fatalf("%s frame %d: %v %v", name, i, bad, err)
			}
			if want := fmt.Sprintf("payload %d %s", i, bytes.Repeat([]byte{'x'}, i)); string(f.Payload) != want {
				t.Fatalf("%s frame %d: payload %q", name, i, f.Payload)
			}
			pf, pbad := l.Parse(data[off:])
			if pbad != OK || !bytes.Equal(pf.Payload, f.Payload) || pf.Size != f.Size {
				t.Fatalf("%s frame %d: Parse %v", name, i, pbad)
			}
		}
	}
}

// Every byte of a frame flipped: the frame no longer checks, and Scan
// finds the next frame (resync), so that damage in the middle is told
// from a torn tail.
func TestFlipAndScan(t *testing.T) {
	for name, l := range layouts {
		data, offs := frames(l, 4)
		for i := offs[1]; i < offs[2]; i++ {
			d := bytes.Clone(data)
			d[i] ^= 0x41
			w := Mem(d)
			if _, bad, _ := l.Read(w, offs[1]); bad == OK {
				t.Fatalf("%s: byte %d flipped, the frame still checks", name, i)
			}
			p, ok, err := l.Scan(w, offs[1]+1)
			if err != nil || !ok || p != offs[2] {
				t.Fatalf("%s: byte %d flipped: scan found %d %v %v, want %d", name, i, p, ok, err, offs[2])
			}
		}
		// Cut inside the last frame: a torn tail, nothing valid after it.
		last := offs[3]
		for cut := last; cut < int64(len(data)); cut++ {
			w := Mem(data[:cut])
			_, bad, _ := l.Read(w, last)
			if bad == OK {
				t.Fatalf("%s: cut at %d reads whole", name, cut)
			}
			if bad.HeaderOK() != (cut >= last+int64(l.HeaderSize)) {
				t.Fatalf("%s: cut at %d: %v", name, cut, bad)
			}
			if _, ok, _ := l.Scan(w, last+1); ok {
				t.Fatalf("%s: cut at %d: a frame after the torn tail", name, cut)
			}
		}
	}
}

// A length from disk is bounded before it is trusted.
func TestLengthBounds(t *testing.T) {
	l := layouts["series"]
	h := header(l, 0)
	for _, n := range []uint32{0, 1<<30 + 1, 1<<32 - 1} {
		h[0], h[1], h[2], h[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
		if _, bad := l.CheckHeader(h, 1<<40); bad != BadLength {
			t.Errorf("length %d: %v", n, bad)
		}
	}
	if _, bad := l.CheckHeader(h[:4], 4); bad != Short {
		t.Errorf("short header: %v", bad)
	}
	if _, bad := layouts["queue"].CheckHeader([]byte("SF"), 2); bad != Short {
		t.Errorf("magic prefix: %v", bad)
	}
	if _, bad := layouts["queue"].CheckHeader([]byte("SX"), 2); bad != BadMagic {
		t.Errorf("bad magic prefix: %v", bad)
	}
	wl := layouts["wal"]
	b := wl.AppendFrame(nil, make([]byte, 13), []byte("p"))
	if _, bad := wl.Parse(b); bad != BadHeader {
		t.Errorf("wal type 0: %v", bad)
	}
}

// A Window over a file reads what it is asked through its buffer, and a
// file that shrank under it is an error, not a short frame.
func TestWindowFile(t *testing.T) {
	m := vfs.NewMem()
	l := layouts["wal"]
	data, offs := frames(l, 50)
	f, err := m.Create("w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(f, data); err != nil {
		t.Fatal(err)
	}
	var w Window
	w.Reset(f, "w", int64(len(data)))
	for _, off := range offs {
		if _, bad, err := l.Read(&w, off); bad != OK || err != nil {
			t.Fatal(bad, err)
		}
	}
	w.Reset(f, "w", int64(len(data))+100)
	if _, err := w.Bytes(int64(len(data)), 50); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read past the file: %v", err)
	}
}

// FuzzParse: no input makes a layout panic, read past its bytes, or accept
// a frame that does not seal to the same bytes.
func FuzzParse(f *testing.F) {
	for _, l := range layouts {
		data, _ := frames(l, 2)
		f.Add(data)
	}
	f.Add([]byte("SFWF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for name, l := range layouts {
			fr, bad := l.Parse(b)
			if bad != OK {
				continue
			}
			again := l.AppendFrame(nil, fr.Header, fr.Payload)
			if !bytes.Equal(again, b[:fr.Size]) {
				t.Fatalf("%s: frame %x does not seal to itself", name, b[:fr.Size])
			}
			if _, ok, err := l.Scan(Mem(b), 0); !ok || err != nil {
				t.Fatalf("%s: scan misses the frame at 0", name)
			}
		}
	})
}
