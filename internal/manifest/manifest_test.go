package manifest

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"math"
	"slices"
	"testing"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/wal"
)

func sampleManifest() *Manifest {
	return &Manifest{
		NextFile: 42, WALStart: 7, LastSeq: 1 << 40, SeriesCount: 3,
		Segments: []Segment{{FileNum: 3, Level: 0, TombApplied: 9}, {FileNum: 40, Level: 6, TombApplied: 0}},
		Tombstones: []wal.Delete{
			{Seq: 5, Selector: point.Selector{Measurement: "m", Field: "f", Tags: []point.Tag{{Key: "k", Value: "v"}}, Start: -5, End: 1 << 62}},
			{Seq: 8, Selector: point.Selector{Measurement: "x", Start: math.MinInt64, End: math.MaxInt64}},
		},
		Obsolete: []uint64{1, 2, 41},
		Format:   FormatVersion,
	}
}

// v1Fixture is the manifest of engine/testdata/format_v1_db, a database
// written by a release that wrote format version 1.
const v1Fixture = "534d414e010507ac0201020400ac02030164" + "00ff8b18d9"

// TestManifestGolden pins the encoding: the bytes a manifest of every kind
// of field encodes to, as earlier releases wrote them, and the version 1
// bytes they read.
func TestManifestGolden(t *testing.T) {
	m := sampleManifest()
	m.SetExpiredBefore(-12345)
	m.Tombstones[1].Selector.Matchers = []point.Matcher{{Key: "h", Op: point.MatchRegexp, Value: "web-.*"}}
	const want = "534d414e022a0780808080802003020300092806000205016d016601016b01760980808080808080808001000801780000" +
		"ffffffffffffffffff01feffffffffffffffff0101016802067765622d2e2a03010229c79fffffffffffff7fb56ee24c"
	if got := hex.EncodeToString(m.Marshal()); got != want {
		t.Fatalf("encoding changed:\n got %s\nwant %s", got, want)
	}
	if got := hex.EncodeToString(New().Marshal()); got != "534d414e02010100000000000073e39c1f" {
		t.Fatalf("new manifest encodes to %s", got)
	}
	b, _ := hex.DecodeString(v1Fixture)
	v1, err := Unmarshal("MANIFEST", b)
	if err != nil {
		t.Fatal(err)
	}
	if v1.Format != FormatVersionV1 || v1.NextFile != 5 || v1.WALStart != 7 || v1.LastSeq != 300 ||
		!slices.Equal(v1.Segments, []Segment{{FileNum: 4, Level: 0, TombApplied: 300}, {FileNum: 3, Level: 1, TombApplied: 100}}) ||
		len(v1.Tombstones) != 0 || v1.Obsolete != nil || v1.ExpiredBefore() != math.MinInt64 {
		t.Fatalf("version 1 fixture = %+v", v1)
	}
}

func TestManifestRoundTrip(t *testing.T) {
	m := sampleManifest()
	got, err := Unmarshal("M", m.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Marshal(), m.Marshal()) || len(got.Tombstones) != 2 || got.Tombstones[0].Selector.Tags[0].Value != "v" || len(got.Obsolete) != 3 {
		t.Fatalf("round trip: %+v", got)
	}
	// Every truncation and every flipped byte is ErrCorrupt, never a panic.
	b := m.Marshal()
	for i := range b {
		if _, err := Unmarshal("M", b[:i]); !errors.Is(err, base.ErrCorrupt) {
			t.Fatalf("cut at %d: %v", i, err)
		}
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if _, err := Unmarshal("M", c); !errors.Is(err, base.ErrCorrupt) {
			t.Fatalf("flip at %d: %v", i, err)
		}
	}
}

// FuzzManifest feeds arbitrary bytes to the manifest decoder. With the
// checksum fixed up, the bytes reach the payload decoder; what decodes
// re-encodes to bytes that decode to the same manifest.
func FuzzManifest(f *testing.F) {
	f.Add(sampleManifest().Marshal(), false)
	f.Add(New().Marshal(), true)
	v1, _ := hex.DecodeString(v1Fixture)
	f.Add(v1, false)
	f.Fuzz(func(t *testing.T, b []byte, fixCRC bool) {
		if fixCRC && len(b) >= 9 {
			b = append([]byte(Magic), b[4:len(b)-4]...)
			b = appendCRC(b)
		}
		m, err := Unmarshal("M", b)
		if err != nil {
			if !errors.Is(err, base.ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		again, err := Unmarshal("M", m.Marshal())
		if err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v", err)
		}
		if !bytes.Equal(again.Marshal(), m.Marshal()) {
			t.Fatal("re-encoding is not stable")
		}
	})
}

// appendCRC appends the manifest checksum of b.
func appendCRC(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// TestManifestTombstoneMatchers checks how tombstones are stored: a version
// 1 manifest (written before matchers existed, laid out by hand here) reads
// with no matchers, and version 2 round-trips the matchers of a delete.
func TestManifestTombstoneMatchers(t *testing.T) {
	appendStr := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	old := append([]byte(Magic), FormatVersionV1)
	for _, v := range []uint64{3, 2, 9, 4, 1, 1, 1, 5, 2} { // counters, one segment, two tombstones
		old = binary.AppendUvarint(old, v)
	}
	old = binary.AppendUvarint(old, 6)
	old = appendStr(appendStr(old, "m"), "")
	old = binary.AppendUvarint(old, 1)
	old = appendStr(appendStr(old, "a"), "b")
	old = binary.AppendVarint(binary.AppendVarint(old, 1), 9)
	old = binary.AppendUvarint(old, 7)
	old = appendStr(appendStr(old, "n"), "")
	old = binary.AppendUvarint(old, 0)
	old = binary.AppendVarint(binary.AppendVarint(old, 0), 0)
	old = appendCRC(old)
	m, err := Unmarshal("MANIFEST", old)
	if err != nil || len(m.Tombstones) != 2 || m.Tombstones[1].Selector.Matchers != nil || !m.Tombstones[1].Selector.AllTime() ||
		m.Tombstones[0].Selector.Tags[0] != (point.Tag{Key: "a", Value: "b"}) {
		t.Fatalf("version 1 manifest: %+v, %v", m, err)
	}

	with := *m
	with.Tombstones = slices.Clone(m.Tombstones)
	with.Tombstones[1].Selector.Matchers = []point.Matcher{{Key: "h", Op: point.MatchRegexp, Value: "web-.*"}, {Key: "dc", Op: point.MatchNotEqual}}
	enc := with.Marshal()
	got, err := Unmarshal("MANIFEST", enc)
	if err != nil {
		t.Fatal(err)
	}
	if got.Tombstones[0].Selector.Matchers != nil || !slices.Equal(got.Tombstones[1].Selector.Matchers, with.Tombstones[1].Selector.Matchers) {
		t.Fatalf("matchers round trip: %+v", got.Tombstones)
	}

	// An unknown matcher op is corruption, never a broader delete.
	d := wal.Delete{Seq: 1, Selector: point.Selector{Measurement: "m", Matchers: []point.Matcher{{Key: "k", Op: point.MatchEqual, Value: "v"}}}}
	rec := d.Marshal(nil)
	rec[len(rec)-3] = 9 // the op byte of the only matcher
	var back wal.Delete
	if err := back.Unmarshal(rec); err == nil {
		t.Errorf("matcher op 9 accepted: %+v", back.Selector)
	}
}

// TestManifestExpiryFloor checks that the expiry floor survives a manifest
// round trip and that a manifest written before the field existed (ending
// after the tombstones) reads as having none.
func TestManifestExpiryFloor(t *testing.T) {
	m := Manifest{NextFile: 3, WALStart: 2, LastSeq: 9, SeriesCount: 4, Format: FormatVersion,
		Segments:   []Segment{{FileNum: 1, Level: 1, TombApplied: 7}},
		Tombstones: []wal.Delete{{Seq: 8, Selector: point.Selector{Measurement: "m", Start: 1, End: 5}}}}
	if m.ExpiredBefore() != math.MinInt64 {
		t.Fatalf("the zero manifest has floor %d", m.ExpiredBefore())
	}
	m.SetExpiredBefore(-12345)
	got, err := Unmarshal("MANIFEST", m.Marshal())
	if err != nil || got.ExpiredBefore() != -12345 || got.LastSeq != 9 || len(got.Tombstones) != 1 {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
	// The older form: the same bytes without the floor, checksum redone.
	old := m
	old.SetExpiredBefore(math.MinInt64)
	b := old.Marshal()
	body := b[:len(b)-4-1] // drop the checksum and the one-byte uvarint of 0
	b = appendCRC(slices.Clone(body))
	got, err = Unmarshal("MANIFEST", b)
	if err != nil || got.ExpiredBefore() != math.MinInt64 {
		t.Fatalf("older manifest = %+v, %v; want no floor", got, err)
	}
}
