package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

func sampleManifest() *manifest {
	return &manifest{
		nextFile: 42, walStart: 7, lastSeq: 1 << 40, seriesCount: 3,
		segments: []manifestSegment{{fileNum: 3, level: 0, tombApplied: 9}, {fileNum: 40, level: 6, tombApplied: 0}},
		tombstones: []tombstone{
			{seq: 5, sel: Selector{Measurement: "m", Field: "f", Tags: []Tag{{Key: "k", Value: "v"}}, Start: -5, End: 1 << 62}},
			{seq: 8, sel: Selector{Measurement: "x", Start: minTime, End: maxTime}},
		},
		obsolete: []uint64{1, 2, 41},
		version:  manifestVersion,
	}
}

func TestManifestRoundTrip(t *testing.T) {
	m := sampleManifest()
	got, err := unmarshalManifest("M", m.marshal())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.marshal(), m.marshal()) || len(got.tombstones) != 2 || got.tombstones[0].sel.Tags[0].Value != "v" || len(got.obsolete) != 3 {
		t.Fatalf("round trip: %+v", got)
	}
	// Every truncation and every flipped byte is ErrCorrupt, never a panic.
	b := m.marshal()
	for i := range b {
		if _, err := unmarshalManifest("M", b[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut at %d: %v", i, err)
		}
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if _, err := unmarshalManifest("M", c); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at %d: %v", i, err)
		}
	}
}

// FuzzManifest feeds arbitrary bytes to the manifest decoder. With the
// checksum fixed up, the bytes reach the payload decoder; what decodes
// re-encodes to bytes that decode to the same manifest.
func FuzzManifest(f *testing.F) {
	f.Add(sampleManifest().marshal(), false)
	f.Add(newManifest().marshal(), true)
	if v1, err := readFileBytes(filepath.Join("testdata", "format_v1_db", manifestName)); err == nil {
		f.Add(v1, false)
	}
	f.Fuzz(func(t *testing.T, b []byte, fixCRC bool) {
		if fixCRC && len(b) >= 9 {
			b = append([]byte(manifestMagic), b[4:len(b)-4]...)
			b = appendCRC(b)
		}
		m, err := unmarshalManifest("M", b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		again, err := unmarshalManifest("M", m.marshal())
		if err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v", err)
		}
		if !bytes.Equal(again.marshal(), m.marshal()) {
			t.Fatal("re-encoding is not stable")
		}
	})
}

func readFileBytes(path string) ([]byte, error) { return os.ReadFile(path) }

// appendCRC appends the manifest checksum of b.
func appendCRC(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}
