package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/base"
)

// TestReadFormatV1 replays a log written in version 1 of the file format
// (20-byte headers without the previous file's size), checked in under
// testdata, and appends to it in the current version.
func TestReadFormatV1(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/format_v1")); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, FileName(2)))
	var got [][]byte
	res, err := ReplayDir(nil, dir, ReplayOptions{From: 1, ReadOnly: true}, func(_ uint64, typ byte, p []byte) error {
		if typ != RecordBatch {
			t.Fatalf("type %d", typ)
		}
		got = append(got, bytes.Clone(p))
		return nil
	})
	if err != nil || res.Files != 2 || len(got) != 6 {
		t.Fatalf("replay of the version 1 log: %d records, %+v, %v", len(got), res, err)
	}
	for i, p := range got {
		if !bytes.Equal(p, []byte{byte(i), 'v', '1'}) {
			t.Fatalf("record %d is %q", i, p)
		}
	}
	l := mustOpen(t, dir, Options{})
	if _, err := l.Append(RecordBatch, []byte("v2")); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	recs, _, err := replayAll(t, nil, dir, 1)
	if err != nil || len(recs) != 7 || string(recs[6].payload) != "v2" {
		t.Fatalf("after appending in version 2: %d records, %v", len(recs), err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, FileName(2)))
	if !bytes.Equal(before, after) {
		t.Fatal("a version 1 file was rewritten")
	}
}

// gapLog writes records over several files and rotates once more, so the
// last file holds no record: nothing after a cut reveals it but the next
// file's header.
func gapLog(t *testing.T) (string, []uint64) {
	t.Helper()
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{SegmentBytes: 512, Sync: SyncNever})
	writeN(t, l, 1, 40)
	if _, err := l.Rotate(); err != nil {
		t.Fatal(err)
	}
	mustClose(t, l)
	nums, err := Files(nil, dir)
	if err != nil || len(nums) < 4 {
		t.Fatalf("files %v, %v", nums, err)
	}
	return dir, nums
}

func TestReplayDetectsCutAtRecordBoundary(t *testing.T) {
	dir, nums := gapLog(t)
	// Cut the file before the empty last one at each record boundary.
	victim := filepath.Join(dir, FileName(nums[len(nums)-2]))
	data, _ := os.ReadFile(victim)
	bounds := []int64{fileHeaderSize}
	for off := int64(fileHeaderSize); off < int64(len(data)); {
		n := int64(data[off]) | int64(data[off+1])<<8 | int64(data[off+2])<<16 | int64(data[off+3])<<24
		off += recordHeaderSize + n
		bounds = append(bounds, off)
	}
	for _, b := range bounds[:len(bounds)-1] {
		writeFile(t, victim, data[:b])
		_, err := ReplayDir(nil, dir, ReplayOptions{From: nums[0], ReadOnly: true}, func(uint64, byte, []byte) error { return nil })
		var ce *base.CorruptionError
		if !errors.As(err, &ce) || ce.Path != filepath.Join(dir, FileName(nums[len(nums)-1])) || !strings.Contains(err.Error(), "cut or extended") {
			t.Fatalf("file cut at record boundary %d: %v", b, err)
		}
	}
	writeFile(t, victim, data)
	if _, _, err := replayAll(t, nil, dir, nums[0]); err != nil {
		t.Fatalf("intact log: %v", err)
	}
}

func TestReplayDetectsMissingFile(t *testing.T) {
	dir, nums := gapLog(t)
	mid := filepath.Join(dir, FileName(nums[1]))
	data, _ := os.ReadFile(mid)
	os.Remove(mid)
	_, _, err := replayAll(t, nil, dir, nums[0])
	wantCorrupt(t, err, mid, 0)
	writeFile(t, mid, data)

	first := filepath.Join(dir, FileName(nums[0]))
	os.Remove(first)
	_, _, err = replayAll(t, nil, dir, nums[0])
	wantCorrupt(t, err, first, 0)
	// From below it, the log starts at the next file: fine.
	if _, _, err := replayAll(t, nil, dir, 0); err != nil {
		t.Fatalf("replay from 0: %v", err)
	}
}

func TestReplayReadOnlyLeavesTornTail(t *testing.T) {
	dir, path, data, recs, _ := fixture(t, 5)
	torn := append(bytes.Clone(data), 1, 2, 3)
	writeFile(t, path, torn)
	var n int
	res, err := ReplayDir(nil, dir, ReplayOptions{ReadOnly: true}, func(uint64, byte, []byte) error { n++; return nil })
	if err != nil || !res.Torn || res.Truncated || n != len(recs) || res.TruncatedOffset != int64(len(data)) {
		t.Fatalf("read-only replay: %+v, %d records, %v", res, n, err)
	}
	if fileLen(t, path) != int64(len(torn)) {
		t.Fatal("read-only replay changed the file")
	}
	if err := TruncateTail(nil, &res); err != nil || fileLen(t, path) != int64(len(data)) || !res.Truncated {
		t.Fatalf("TruncateTail: %v, %+v", err, res)
	}
}
