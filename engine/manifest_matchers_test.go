package engine

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/stratadb/strata/wal"
)

// TestManifestTombstoneMatchers checks how tombstones are stored: a version
// 1 manifest (written before matchers existed, laid out by hand here) reads
// with no matchers, and version 2 round-trips the matchers of a delete.
func TestManifestTombstoneMatchers(t *testing.T) {
	appendStr := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	old := append([]byte(manifestMagic), manifestVersionV1)
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
	old = binary.LittleEndian.AppendUint32(old, crc32.Checksum(old, castagnoli))
	m, err := unmarshalManifest("MANIFEST", old)
	if err != nil || len(m.tombstones) != 2 || m.tombstones[1].sel.Matchers != nil || !m.tombstones[1].sel.AllTime() ||
		m.tombstones[0].sel.Tags[0] != (Tag{Key: "a", Value: "b"}) {
		t.Fatalf("version 1 manifest: %+v, %v", m, err)
	}

	with := *m
	with.tombstones = slices.Clone(m.tombstones)
	with.tombstones[1].sel.Matchers = []Matcher{{Key: "h", Op: MatchRegexp, Value: "web-.*"}, {Key: "dc", Op: MatchNotEqual}}
	enc := with.marshal()
	got, err := unmarshalManifest("MANIFEST", enc)
	if err != nil {
		t.Fatal(err)
	}
	if got.tombstones[0].sel.Matchers != nil || !slices.Equal(got.tombstones[1].sel.Matchers, with.tombstones[1].sel.Matchers) {
		t.Fatalf("matchers round trip: %+v", got.tombstones)
	}

	// An unknown matcher op is corruption, never a broader delete.
	d := wal.Delete{Seq: 1, Selector: Selector{Measurement: "m", Matchers: []Matcher{{Key: "k", Op: MatchEqual, Value: "v"}}}}
	rec := d.Marshal(nil)
	rec[len(rec)-3] = 9 // the op byte of the only matcher
	var back wal.Delete
	if err := back.Unmarshal(rec); err == nil {
		t.Errorf("matcher op 9 accepted: %+v", back.Selector)
	}
}
