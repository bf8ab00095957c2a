package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
)

// allocated returns the bytes f allocates (the whole process's, so callers
// leave slack for the runtime).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// noSyncFS skips fsync, which dominates the cost of a fuzz iteration and
// proves nothing here.
type noSyncFS struct{ vfs.FS }

type noSyncFile struct{ vfs.File }

func (fs noSyncFS) Open(name string) (vfs.File, error) {
	f, err := fs.FS.Open(name)
	return noSyncFile{f}, err
}

func (fs noSyncFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name)
	return noSyncFile{f}, err
}

func (noSyncFile) Sync() error { return nil }

// FuzzReader writes arbitrary bytes as the only WAL file and replays it.
// Replay must not panic, must not allocate more than the file's size plus a
// constant, must fail only with ErrCorrupt, and when it succeeds, the
// repaired file must replay again to the same records with nothing to
// repair.
func FuzzReader(f *testing.F) {
	f.Add(appendFileHeader(nil, 1, noPreviousFile))
	f.Add(appendRecord(appendFileHeader(nil, 1, noPreviousFile), RecordBatch, []byte("payload")))
	dir := f.TempDir()
	path := filepath.Join(dir, FileName(1))
	fs := noSyncFS{vfs.Default}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var recs [][]byte
		var res ReplayResult
		var err error
		alloc := allocated(func() {
			res, err = Replay(fs, dir, 1, func(file uint64, typ byte, payload []byte) error {
				if file != 1 || typ == 0 {
					t.Fatalf("record in file %d with type %d", file, typ)
				}
				recs = append(recs, bytes.Clone(payload))
				return nil
			})
		})
		var payloadBytes uint64
		for _, p := range recs {
			payloadBytes += uint64(len(p)) + 64 // the test's own copies
		}
		if limit := 2*uint64(len(data)) + payloadBytes + 128<<10; alloc > limit {
			t.Fatalf("replay of %d bytes allocated %d (limit %d)", len(data), alloc, limit)
		}
		if err != nil {
			if !errors.Is(err, base.ErrCorrupt) {
				t.Fatalf("replay failed with a non-corruption error: %v", err)
			}
			return
		}
		size := int64(len(data))
		if res.Truncated {
			if res.TruncatedOffset+res.TruncatedBytes != size {
				t.Fatalf("truncated %d bytes at %d of a %d-byte file", res.TruncatedBytes, res.TruncatedOffset, size)
			}
			size = res.TruncatedOffset
		}
		if fi, err := os.Stat(path); err != nil || fi.Size() != size {
			t.Fatalf("file is %v bytes after replay, want %d (%v)", fi.Size(), size, err)
		}
		var again [][]byte
		res2, err := Replay(fs, dir, 1, func(_ uint64, _ byte, payload []byte) error {
			again = append(again, bytes.Clone(payload))
			return nil
		})
		if err != nil || res2.Truncated || len(again) != len(recs) {
			t.Fatalf("second replay: %d records (first %d), %+v, %v", len(again), len(recs), res2, err)
		}
		for i := range again {
			if !bytes.Equal(again[i], recs[i]) {
				t.Fatalf("second replay: record %d differs", i)
			}
		}
	})
}

// FuzzBatch decodes arbitrary bytes as a Batch. Decoding must not panic or
// size its slices beyond a small multiple of the input, and whatever decodes
// must re-encode to bytes that decode to the same batch and encode the same.
func FuzzBatch(f *testing.F) {
	f.Add([]byte{})
	f.Add((&Batch{}).Marshal(nil))
	f.Add(edgeBatch().Marshal(nil))
	f.Add(iotBatch(20).Marshal(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b Batch
		var err error
		alloc := allocated(func() { err = b.Unmarshal(data) })
		// The slices Unmarshal sized from counts in the input, exactly, and
		// a loose bound on everything the process allocated meanwhile.
		sized := uint64(cap(b.Series))*uint64(unsafe.Sizeof(SeriesDef{})) +
			uint64(cap(b.Entries))*uint64(unsafe.Sizeof(point.Entry{}))
		if limit := 16 * uint64(len(data)); sized > limit {
			t.Fatalf("unmarshal of %d bytes sized slices of %d bytes (limit %d)", len(data), sized, limit)
		}
		if limit := 20*uint64(len(data)) + 1<<20; alloc > limit {
			t.Fatalf("unmarshal of %d bytes allocated %d (limit %d)", len(data), alloc, limit)
		}
		if err != nil {
			if !errors.Is(err, base.ErrCorrupt) {
				t.Fatalf("unmarshal error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		enc := b.Marshal(nil)
		var b2 Batch
		if err := b2.Unmarshal(enc); err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		equalBatch(t, &b2, &b)
		if enc2 := b2.Marshal(nil); !bytes.Equal(enc, enc2) {
			t.Fatal("encoding is not stable")
		}
	})
}

// FuzzDelete decodes arbitrary bytes as a Delete (matchers included):
// never a panic, errors wrap ErrCorrupt, and whatever decodes re-encodes
// to bytes that decode and encode the same.
func FuzzDelete(f *testing.F) {
	f.Add([]byte{})
	f.Add((&Delete{Seq: 1, Selector: point.Selector{Measurement: "m", Start: 1, End: 2}}).Marshal(nil))
	f.Add((&Delete{Seq: 9, Selector: point.Selector{Measurement: "m", Field: "f",
		Tags:     []point.Tag{{Key: "a", Value: "b"}},
		Matchers: []point.Matcher{{Key: "h", Op: point.MatchNotRegexp, Value: "x.*"}, {Key: "z", Op: point.MatchNotEqual}}}}).Marshal(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Delete
		if err := d.Unmarshal(data); err != nil {
			if !errors.Is(err, base.ErrCorrupt) {
				t.Fatalf("unmarshal error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		enc := d.Marshal(nil)
		var d2 Delete
		if err := d2.Unmarshal(enc); err != nil {
			t.Fatalf("re-encoded delete does not decode: %v", err)
		}
		if enc2 := d2.Marshal(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n%x\n%x", enc, enc2)
		}
	})
}
