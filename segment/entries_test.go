package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/stratadb/strata/internal/point"
)

// withStreaming makes Entries stream every compressed index through
// buffers of bufLen bytes for the rest of the test.
func withStreaming(t testing.TB, bufLen int) {
	oldBuf, oldMin := streamBufLen, streamMinRaw
	t.Cleanup(func() { streamBufLen, streamMinRaw = oldBuf, oldMin })
	streamBufLen, streamMinRaw = bufLen, 0
}

// entriesSegment writes n random series, every fifth with rollup buckets
// before its samples, with the index streamed by the Writer when stream
// is set, and returns the Writer's Meta.
func entriesSegment(t testing.TB, fs *memFS, name string, rng *rand.Rand, n int, stream bool) Meta {
	t.Helper()
	if stream {
		defer func(at int) { indexStreamAt = at }(indexStreamAt)
		indexStreamAt = 4 << 10
	}
	w, err := Create(name, WriterOptions{FS: fs, BlockSamples: 8})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range randomSeries(rng, n, 40) {
		if i%5 == 0 && s.kind.Numeric() {
			// Buckets aligned to the hour, ending before the first sample.
			start := point.FloorTime(s.samples[0].Time, 3600e9) - 4*3600e9
			if start < s.samples[0].Time {
				rus := testRollups(rng, s.kind, 3, 3600e9, start)
				if err := w.AddRollups(s.key, s.kind, rus); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Add(s.key, s.kind, s.samples); err != nil {
			t.Fatal(err)
		}
	}
	meta, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

// lazyEntries opens name lazily with meta and starts its Entries, both
// closed when the test ends.
func lazyEntries(t *testing.T, fs *memFS, name string, meta Meta) (*Reader, *Entries) {
	t.Helper()
	r, err := OpenLazy(fs, name, meta)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	it, err := r.Entries()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(it.Close)
	return r, it
}

// TestEntriesMatchIndex reads segments through Entries, streamed with
// buffers from smaller than one entry to larger than the index, and
// checks that every entry equals what the loaded index gives, that each
// entry is intact after the next one is decoded, and that streaming loads
// nothing into the Reader.
func TestEntriesMatchIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	fs := newMemFS()
	for _, stream := range []bool{false, true} {
		name := fmt.Sprintf("/db/e-%v.seg", stream)
		meta := entriesSegment(t, fs, name, rng, 1500, stream)
		want, err := Open(fs, name)
		if err != nil {
			t.Fatal(err)
		}
		defer want.Close()
		for _, bufLen := range []int{16, 100, 4 << 10, 1 << 20} {
			t.Run(fmt.Sprintf("stream=%v/buf=%d", stream, bufLen), func(t *testing.T) {
				withStreaming(t, bufLen)
				r, it := lazyEntries(t, fs, name, meta)
				if it.t != nil {
					t.Fatal("the index was decoded whole, not streamed")
				}
				cur, next := new(SeriesIndex), new(SeriesIndex)
				var prev *SeriesIndex
				for i := 0; ; i++ {
					ok, err := it.Next(next)
					if err != nil {
						t.Fatalf("series %d: %v", i, err)
					}
					if prev != nil && !sameEntry(prev, want.Series(i-1)) {
						t.Fatalf("series %d changed when series %d was decoded", i-1, i)
					}
					if !ok {
						if i != want.NumSeries() {
							t.Fatalf("%d series, want %d", i, want.NumSeries())
						}
						break
					}
					if !sameEntry(next, want.Series(i)) {
						t.Fatalf("series %d:\n%+v\nwant\n%+v", i, next, want.Series(i))
					}
					prev = next
					cur, next = next, cur
				}
				if r.Loaded() {
					t.Fatal("streaming loaded the index")
				}
			})
		}
	}
}

// sameEntry reports whether two entries are equal, an empty slice and a
// nil one alike (a reused SeriesIndex keeps its empty slices).
func sameEntry(a, b *SeriesIndex) bool {
	norm := func(s *SeriesIndex) SeriesIndex {
		c := *s
		if len(c.Blocks) == 0 {
			c.Blocks = nil
		}
		if len(c.Rollups) == 0 {
			c.Rollups = nil
		}
		return c
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// TestOpenLazy checks a Reader that loads its index on demand: what it
// answers before, that the first lookup loads it, and that every answer
// equals Open's.
func TestOpenLazy(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	fs := newMemFS()
	meta := entriesSegment(t, fs, "/db/l.seg", rng, 300, false)
	want, err := Open(fs, "/db/l.seg")
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	r, err := OpenLazy(fs, "/db/l.seg", meta)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Loaded() || r.NumSeries() != want.NumSeries() || !reflect.DeepEqual(r.Meta(), want.Meta()) {
		t.Fatalf("lazy reader: loaded %v, %d series, meta %+v, want %+v", r.Loaded(), r.NumSeries(), r.Meta(), want.Meta())
	}
	if _, ok := r.Find([]byte("no such series")); ok || r.Loaded() {
		t.Fatalf("Find of a key the bloom filter lacks: found %v, loaded %v", ok, r.Loaded())
	}
	key := want.Key(want.NumSeries() / 2)
	got, ok := r.Find(key)
	if !ok || !r.Loaded() || !reflect.DeepEqual(got, want.Series(want.NumSeries()/2)) {
		t.Fatalf("Find(%q) = %+v, %v (loaded %v)", key, got, ok, r.Loaded())
	}
	for i := range want.NumSeries() {
		if !reflect.DeepEqual(r.Series(i), want.Series(i)) || !bytes.Equal(r.Key(i), want.Key(i)) {
			t.Fatalf("series %d differs", i)
		}
	}
	all, err := readAll(r)
	if err != nil {
		t.Fatal(err)
	}
	wantAll, err := readAll(want)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffSeries(wantAll, all); d != "" {
		t.Fatal(d)
	}
}

// TestLazyMismatch opens segments lazily with a Meta that does not match
// the file: OpenLazy, Load and Entries must each report the corruption,
// Load the same way every time, and nothing may panic.
func TestLazyMismatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	fs := newMemFS()
	meta := entriesSegment(t, fs, "/db/c.seg", rng, 400, true)
	withStreaming(t, 64)
	if _, err := OpenLazy(fs, "/db/c.seg", Meta{Size: meta.Size + 1}); err == nil {
		t.Fatal("OpenLazy accepted the wrong size")
	} else {
		checkCorrupt(t, "size", err)
	}
	for _, tc := range []struct {
		name   string
		change func(m *Meta)
	}{
		{"series", func(m *Meta) { m.Series++ }},
		{"fewer series", func(m *Meta) { m.Series-- }},
		{"samples", func(m *Meta) { m.Samples-- }},
		{"min time", func(m *Meta) { m.MinTime++ }},
		{"max time", func(m *Meta) { m.MaxTime-- }},
		{"first key", func(m *Meta) { m.FirstKey = []byte("a") }},
		{"last key", func(m *Meta) { m.LastKey = slices.Concat(m.LastKey, []byte("x")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := meta
			tc.change(&m)
			r, err := OpenLazy(fs, "/db/c.seg", m)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			checkCorrupt(t, "entries", readEntries(r))
			err1, err2 := r.Load(), r.Load()
			checkCorrupt(t, "load", err1)
			if err1 != err2 || r.Loaded() {
				t.Fatalf("second Load: %v, loaded %v", err2, r.Loaded())
			}
		})
	}
}

// readEntries reads every entry of r and returns the first error.
func readEntries(r *Reader) error {
	it, err := r.Entries()
	if err != nil {
		return err
	}
	defer it.Close()
	var s SeriesIndex
	for {
		ok, err := it.Next(&s)
		if !ok || err != nil {
			return err
		}
	}
}

// TestLazyCorruptionEveryByte flips each byte of a segment with a streamed
// index and opens it lazily with the Meta of the intact file: OpenLazy,
// Entries and Load must each report a corruption or give exactly the
// intact entries.
func TestLazyCorruptionEveryByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 2))
	fs := newMemFS()
	meta := entriesSegment(t, fs, "/db/g.seg", rng, 60, true)
	good := fs.bytes(t, "/db/g.seg")
	ref, err := Open(fs, "/db/g.seg")
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	withStreaming(t, 64)
	for i := range good {
		data := bytes.Clone(good)
		data[i] ^= 0x10
		fs.put("/db/c.seg", data)
		m := meta
		m.Path = "/db/c.seg"
		r, err := OpenLazy(fs, "/db/c.seg", m)
		if err != nil {
			checkCorrupt(t, fmt.Sprintf("open, byte %d", i), err)
			continue
		}
		it, err := r.Entries()
		if err == nil {
			var s SeriesIndex
			for n := 0; ; n++ {
				var ok bool
				if ok, err = it.Next(&s); err != nil || !ok {
					break
				}
				if !sameEntry(&s, ref.Series(n)) {
					t.Fatalf("byte %d: series %d read wrong without an error", i, n)
				}
			}
			it.Close()
		}
		if err != nil {
			checkCorrupt(t, fmt.Sprintf("entries, byte %d", i), err)
		}
		if err := r.Load(); err != nil {
			checkCorrupt(t, fmt.Sprintf("load, byte %d", i), err)
		} else if !reflect.DeepEqual(r.tab().raw, ref.tab().raw) {
			t.Fatalf("byte %d: loaded a different index without an error", i)
		}
		r.Close()
	}
}

// TestEntriesClosed checks that an iteration closed early ends with an
// error rather than a silent end of the series.
func TestEntriesClosed(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	fs := newMemFS()
	meta := entriesSegment(t, fs, "/db/x.seg", rng, 50, false)
	withStreaming(t, 64)
	_, it := lazyEntries(t, fs, "/db/x.seg", meta)
	var s SeriesIndex
	if ok, err := it.Next(&s); !ok || err != nil {
		t.Fatalf("first entry: %v, %v", ok, err)
	}
	it.Close()
	if ok, err := it.Next(&s); ok || !errors.Is(err, errEntriesClosed) {
		t.Fatalf("after Close: %v, %v", ok, err)
	}
}
