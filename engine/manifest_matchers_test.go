package engine

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"
)

// TestManifestTombstoneMatchers checks the optional matchers part of the
// manifest: absent when no tombstone has matchers (the bytes are exactly
// the format before matchers existed), and round-tripping when some do.
func TestManifestTombstoneMatchers(t *testing.T) {
	plain := &manifest{nextFile: 3, walStart: 2, lastSeq: 9, seriesCount: 4,
		segments: []manifestSegment{{fileNum: 1, level: 1, tombApplied: 5}},
		tombstones: []tombstone{
			{seq: 6, sel: Selector{Measurement: "m", Tags: []Tag{{Key: "a", Value: "b"}}, Start: 1, End: 9}},
			{seq: 7, sel: Selector{Measurement: "n"}},
		}}
	// The format before matchers, written out by hand.
	old := append([]byte(manifestMagic), manifestVersion)
	for _, v := range []uint64{3, 2, 9, 4, 1, 1, 1, 5, 2} {
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
	old = binary.LittleEndian.AppendUint32(old, crc32.Checksum(old, castagnoli))
	if got := plain.marshal(); !bytes.Equal(got, old) {
		t.Fatalf("a manifest without matchers changed format:\n got %x\nwant %x", got, old)
	}
	m, err := unmarshalManifest("MANIFEST", old)
	if err != nil || len(m.tombstones) != 2 || m.tombstones[1].sel.Matchers != nil || !m.tombstones[1].sel.AllTime() {
		t.Fatalf("old manifest: %+v, %v", m, err)
	}

	with := *plain
	with.tombstones = slices.Clone(plain.tombstones)
	with.tombstones[1].sel.Matchers = []Matcher{{Key: "h", Op: MatchRegexp, Value: "web-.*"}, {Key: "dc", Op: MatchNotEqual}}
	enc := with.marshal()
	m, err = unmarshalManifest("MANIFEST", enc)
	if err != nil {
		t.Fatal(err)
	}
	if m.tombstones[0].sel.Matchers != nil || !slices.Equal(m.tombstones[1].sel.Matchers, with.tombstones[1].sel.Matchers) {
		t.Fatalf("matchers round trip: %+v", m.tombstones)
	}
	// A damaged part is corruption, not a broader delete: a tombstone index
	// out of range, or named twice.
	for _, idx := range [][]uint64{{5}, {1, 1}} {
		b := slices.Clone(old[:len(old)-4])
		b = binary.AppendUvarint(b, uint64(len(idx)))
		for _, i := range idx {
			b = binary.AppendUvarint(b, i)
			b = append(b, 1, 1, 'k', byte(MatchEqual), 1, 'v')
		}
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
		if _, err := unmarshalManifest("MANIFEST", b); err == nil {
			t.Errorf("matchers part naming tombstones %v accepted", idx)
		}
	}
}
