package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/vfs"
)

// fixture writes n records into one file and returns the dir, the file's
// path and bytes, the records and the offset each record starts at.
func fixture(t *testing.T, n int) (dir, path string, data []byte, recs []rec, starts []int64) {
	t.Helper()
	dir = t.TempDir()
	l := mustOpen(t, dir, Options{Sync: SyncNever})
	recs, poss := writeN(t, l, 1, n)
	mustClose(t, l)
	path = filepath.Join(dir, FileName(poss[0].File))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	prev := int64(fileHeaderSize)
	for _, p := range poss {
		starts = append(starts, prev)
		prev = p.Offset
	}
	if prev != int64(len(data)) {
		t.Fatalf("last position %d, file has %d bytes", prev, len(data))
	}
	return dir, path, data, recs, starts
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func fileLen(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// wantCorrupt checks that err is a corruption of path at off.
func wantCorrupt(t *testing.T, err error, path string, off int64) {
	t.Helper()
	if !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("error %v, want ErrCorrupt", err)
	}
	var ce *base.CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *base.CorruptionError", err)
	}
	if ce.Path != path || ce.Offset != off {
		t.Fatalf("corruption at %s:%d, want %s:%d (%v)", ce.Path, ce.Offset, path, off, err)
	}
}

func TestTornTailEveryOffset(t *testing.T) {
	dir, path, data, recs, starts := fixture(t, 5)
	last := starts[len(starts)-1]
	for cut := last; cut < int64(len(data)); cut++ {
		writeFile(t, path, data[:cut])
		got, res, err := replayAll(t, nil, dir, 1)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		equalRecs(t, got, recs[:len(recs)-1])
		torn := cut > last
		if res.Truncated != torn {
			t.Fatalf("cut at %d: Truncated = %v", cut, res.Truncated)
		}
		if torn && (res.TruncatedFile != path || res.TruncatedOffset != last || res.TruncatedBytes != cut-last) {
			t.Fatalf("cut at %d: result %+v, want %s truncated at %d dropping %d", cut, res, path, last, cut-last)
		}
		if n := fileLen(t, path); n != last {
			t.Fatalf("cut at %d: file has %d bytes after replay, want %d", cut, n, last)
		}
		// Replay is idempotent: the repaired file replays clean.
		got, res, err = replayAll(t, nil, dir, 1)
		if err != nil || res.Truncated || len(got) != len(recs)-1 {
			t.Fatalf("cut at %d: second replay: %d records, %+v, %v", cut, len(got), res, err)
		}
	}
}

func TestZeroTailIsTorn(t *testing.T) {
	dir, path, data, recs, starts := fixture(t, 4)
	end := int64(len(data))
	cases := map[string][]byte{
		// A preallocated or extended file: zeros after the last record.
		"zeros after records": append(bytes.Clone(data), make([]byte, 4096)...),
		// The last record's blocks never reached the disk.
		"zeroed last record": append(bytes.Clone(data[:starts[3]]), make([]byte, end-starts[3])...),
		"short zero tail":    append(bytes.Clone(data), make([]byte, 5)...),
	}
	for name, file := range cases {
		t.Run(name, func(t *testing.T) {
			writeFile(t, path, file)
			got, res, err := replayAll(t, nil, dir, 1)
			if err != nil {
				t.Fatal(err)
			}
			wantRecs := recs
			cutAt := end
			if name == "zeroed last record" {
				wantRecs, cutAt = recs[:3], starts[3]
			}
			equalRecs(t, got, wantRecs)
			if !res.Truncated || res.TruncatedOffset != cutAt || res.TruncatedBytes != int64(len(file))-cutAt {
				t.Fatalf("result %+v, want truncated at %d", res, cutAt)
			}
			if n := fileLen(t, path); n != cutAt {
				t.Fatalf("file has %d bytes, want %d", n, cutAt)
			}
		})
	}
}

func TestFlipEveryByteOfMiddleRecord(t *testing.T) {
	dir, path, data, recs, starts := fixture(t, 5)
	mid := 2
	for i := starts[mid]; i < starts[mid+1]; i++ {
		bad := bytes.Clone(data)
		bad[i] ^= 0x5a
		writeFile(t, path, bad)
		got, res, err := replayAll(t, nil, dir, 1)
		wantCorrupt(t, err, path, starts[mid])
		equalRecs(t, got, recs[:mid])
		if res.Truncated {
			t.Fatalf("flip at %d: corruption reported as a torn tail", i)
		}
		if n := fileLen(t, path); n != int64(len(data)) {
			t.Fatalf("flip at %d: corrupt file was modified to %d bytes", i, n)
		}
	}
}

// A bad last record is a torn tail even when it is damaged rather than
// short, since nothing valid follows it.
func TestFlipInLastRecordIsTorn(t *testing.T) {
	dir, path, data, recs, starts := fixture(t, 3)
	for _, i := range []int64{starts[2], starts[2] + 4, starts[2] + 9, int64(len(data)) - 1} {
		bad := bytes.Clone(data)
		bad[i] ^= 0xff
		writeFile(t, path, bad)
		got, res, err := replayAll(t, nil, dir, 1)
		if err != nil {
			t.Fatalf("flip at %d: %v", i, err)
		}
		equalRecs(t, got, recs[:2])
		if !res.Truncated || res.TruncatedOffset != starts[2] {
			t.Fatalf("flip at %d: result %+v", i, res)
		}
	}
}

func TestCorruptionInEarlierFile(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, Options{Sync: SyncNever})
	first, poss := writeN(t, l, 0, 4)
	if _, err := l.Rotate(); err != nil {
		t.Fatal(err)
	}
	writeN(t, l, 4, 4)
	mustClose(t, l)
	path := filepath.Join(dir, FileName(poss[0].File))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lastStart := poss[2].Offset

	t.Run("torn tail", func(t *testing.T) {
		writeFile(t, path, data[:len(data)-3])
		got, res, err := replayAll(t, nil, dir, 1)
		wantCorrupt(t, err, path, lastStart)
		equalRecs(t, got, first[:3])
		if res.Truncated || fileLen(t, path) != int64(len(data))-3 {
			t.Fatalf("an earlier file was truncated: %+v", res)
		}
	})
	t.Run("zero tail", func(t *testing.T) {
		writeFile(t, path, append(bytes.Clone(data), 0, 0, 0, 0))
		_, _, err := replayAll(t, nil, dir, 1)
		wantCorrupt(t, err, path, int64(len(data)))
	})
	t.Run("flipped byte", func(t *testing.T) {
		bad := bytes.Clone(data)
		bad[len(bad)-1] ^= 1
		writeFile(t, path, bad)
		_, _, err := replayAll(t, nil, dir, 1)
		wantCorrupt(t, err, path, lastStart)
	})
	t.Run("short header", func(t *testing.T) {
		writeFile(t, path, data[:fileHeaderSize-1])
		_, _, err := replayAll(t, nil, dir, 1)
		wantCorrupt(t, err, path, 0)
	})
	t.Run("skipped by from", func(t *testing.T) {
		writeFile(t, path, data[:len(data)-3])
		if _, _, err := replayAll(t, nil, dir, 2); err != nil {
			t.Fatalf("replay from 2 read file 1: %v", err)
		}
	})
}

func TestFileHeader(t *testing.T) {
	dir, path, data, _, _ := fixture(t, 3)
	corrupt := func(name string, mutate func(h []byte)) {
		t.Run(name, func(t *testing.T) {
			bad := bytes.Clone(data)
			mutate(bad[:fileHeaderSize])
			writeFile(t, path, bad)
			_, res, err := replayAll(t, nil, dir, 1)
			wantCorrupt(t, err, path, 0)
			if res.Truncated {
				t.Fatalf("a damaged header was taken for a torn tail: %+v", res)
			}
		})
	}
	corrupt("magic", func(h []byte) { h[0] = 'X' })
	corrupt("version", func(h []byte) { h[4] = 9 })
	corrupt("checksum", func(h []byte) { h[9] ^= 1 })
	corrupt("zeroed with records after", func(h []byte) { clear(h) })

	t.Run("renamed file", func(t *testing.T) {
		writeFile(t, path, data)
		moved := filepath.Join(dir, FileName(7))
		if err := os.Rename(path, moved); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(moved, path)
		// From 0, so that the header check, not the missing file 1, finds it.
		_, _, err := replayAll(t, nil, dir, 0)
		wantCorrupt(t, err, moved, 0)
	})

	// A crash right after the file was created leaves it short or zeroed:
	// the last file's header is then a torn tail, and the emptied file is
	// accepted once a later file exists.
	for _, torn := range [][]byte{data[:7], make([]byte, fileHeaderSize), make([]byte, 100), nil} {
		writeFile(t, path, torn)
		got, res, err := replayAll(t, nil, dir, 1)
		if err != nil {
			t.Fatalf("torn header of %d bytes: %v", len(torn), err)
		}
		if len(got) != 0 || res.Truncated != (len(torn) > 0) || fileLen(t, path) != 0 {
			t.Fatalf("torn header of %d bytes: %d records, %+v", len(torn), len(got), res)
		}
	}
	l := mustOpen(t, dir, Options{})
	more, _ := writeN(t, l, 10, 2)
	mustClose(t, l)
	got, _, err := replayAll(t, nil, dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	equalRecs(t, got, more)
}

func TestReplayCallbackError(t *testing.T) {
	dir, path, _, _, starts := fixture(t, 5)
	stop := errors.New("stop")
	calls := 0
	_, err := Replay(nil, dir, 1, func(uint64, byte, []byte) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if err != stop || calls != 3 {
		t.Fatalf("Replay = %v after %d calls, want the callback's error after 3", err, calls)
	}
	// A decode failure in the callback is located at the record.
	calls = 0
	_, err = Replay(nil, dir, 1, func(_ uint64, _ byte, p []byte) error {
		calls++
		if calls == 2 {
			var b Batch
			return b.Unmarshal(p) // not a batch payload
		}
		return nil
	})
	wantCorrupt(t, err, path, starts[1])
}

func TestReplayEmpty(t *testing.T) {
	res, err := Replay(vfs.Default, filepath.Join(t.TempDir(), "missing"), 1, nil)
	if err != nil || res.Files != 0 {
		t.Fatalf("replay of a missing dir: %+v, %v", res, err)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "notes.txt"), []byte("not a wal file"))
	l := mustOpen(t, dir, Options{})
	mustClose(t, l)
	got, res, err := replayAll(t, nil, dir, 1)
	if err != nil || len(got) != 0 || res.Files != 1 || res.LastFile != 1 {
		t.Fatalf("replay of an empty log: %d records, %+v, %v", len(got), res, err)
	}
}

// recordHeader returns a record header claiming n payload bytes, with a
// valid header checksum and a zero payload checksum.
func recordHeader(n uint32, typ byte) []byte {
	h := binary.LittleEndian.AppendUint32(nil, n)
	h = append(h, typ)
	h = binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, castagnoli))
	return append(h, 0, 0, 0, 0)
}

// A length that claims more than the file holds, or more than the maximum,
// is never used to size a buffer: the record is bad (here, a torn tail).
func TestHugeLengthNotTrusted(t *testing.T) {
	dir, path, data, recs, starts := fixture(t, 3)
	for _, n := range []uint32{maxPayload + 1, 1<<32 - 1, uint32(len(data))} {
		bad := append(bytes.Clone(data[:starts[2]]), recordHeader(n, RecordBatch)...)
		bad = append(bad, "a few payload bytes"...)
		writeFile(t, path, bad)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, res, err := replayAll(t, nil, dir, 1)
		runtime.ReadMemStats(&after)
		if err != nil || !res.Truncated || res.TruncatedOffset != starts[2] {
			t.Fatalf("length %d: %+v, %v", n, res, err)
		}
		equalRecs(t, got, recs[:2])
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
			t.Errorf("length %d: replay of a %d-byte file allocated %d bytes", n, len(bad), alloc)
		}
	}
}
