package segment

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
)

// sameReader fails unless a and b are the same Reader of the same file:
// metadata, index table, bloom filter, raw index, every decoded series
// entry and every sample.
func sameReader(t *testing.T, what string, a, b *Reader) {
	t.Helper()
	if a.path != b.path || !reflect.DeepEqual(a.meta, b.meta) {
		t.Fatalf("%s: meta\n%+v\nwant\n%+v", what, a.meta, b.meta)
	}
	if !reflect.DeepEqual(a.tab(), b.tab()) {
		t.Fatalf("%s: index tables differ:\n%+v\nwant\n%+v", what, a.tab(), b.tab())
	}
	if !reflect.DeepEqual(a.bloom, b.bloom) {
		t.Fatalf("%s: bloom filters differ", what)
	}
	if !bytes.Equal(a.tab().raw, b.tab().raw) {
		t.Fatalf("%s: raw indexes differ", what)
	}
	for i := range b.NumSeries() {
		if sa, sb := a.Series(i), b.Series(i); !reflect.DeepEqual(sa, sb) {
			t.Fatalf("%s: series %d:\n%+v\nwant\n%+v", what, i, sa, sb)
		}
		if _, ok := a.Find(b.Key(i)); !ok {
			t.Fatalf("%s: Find misses %q", what, b.Key(i))
		}
	}
	ga, err := readAll(a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	gb, err := readAll(b)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if d := diffSeries(gb, ga); d != "" {
		t.Fatalf("%s: %s", what, d)
	}
}

// checkFinishReader writes a segment with fill two ways (Finish;
// FinishReader) and requires the same file both times, and from
// FinishReader a Reader that has not read the index, whose entries
// (streamed, then loaded) are those of the Reader Open returns. It returns
// the file.
func checkFinishReader(t *testing.T, what string, opts WriterOptions, fill func(w *Writer) error) []byte {
	t.Helper()
	const name = "/db/k.seg"
	write := func(finish func(w *Writer) (*Reader, error)) (*memFS, *Reader) {
		t.Helper()
		fs := newMemFS()
		o := opts
		o.FS = fs
		w, err := Create(name, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := fill(w); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		r, err := finish(w)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return fs, r
	}
	plain, _ := write(func(w *Writer) (*Reader, error) {
		_, err := w.Finish()
		return nil, err
	})
	want := plain.bytes(t, name)
	fs, r := write((*Writer).FinishReader)
	defer r.Close()
	if got := fs.bytes(t, name); !bytes.Equal(got, want) {
		t.Fatalf("%s: FinishReader wrote another file", what)
	}
	opened, err := Open(fs, name)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer opened.Close()
	if r.Loaded() {
		t.Fatalf("%s: FinishReader read the index", what)
	}
	it, err := r.Entries()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer it.Close()
	var e SeriesIndex
	for i := 0; ; i++ {
		ok, err := it.Next(&e)
		if err != nil || ok != (i < opened.NumSeries()) || ok && !sameEntry(&e, opened.Series(i)) {
			t.Fatalf("%s: entry %d: %v, %v", what, i, ok, err)
		}
		if !ok {
			break
		}
	}
	sameReader(t, what, r, opened)
	return want
}

// addAll adds series whole with Writer.Add.
func addAll(series []testSeries) func(w *Writer) error {
	return func(w *Writer) error {
		for _, s := range series {
			if err := w.Add(s.key, s.kind, s.samples); err != nil {
				return err
			}
		}
		return nil
	}
}

// indexCompressed reports whether the index section of a segment file is
// compressed.
func indexCompressed(t *testing.T, data []byte) bool {
	t.Helper()
	ft, err := parseFooter(data[len(data)-footerLen:], formatVersion)
	if err != nil {
		t.Fatal(err)
	}
	return data[ft.indexOff]&flagZstd != 0
}

// TestFinishReaderMatchesOpen: the Reader FinishReader returns, once it
// has loaded its index, is the one Open builds from the file, for indexes held whole and streamed to the compressor, compressed
// or stored raw; inline and stored blocks of every kind; rollups; copied
// blocks; the Parallel encoder; and an empty segment.
func TestFinishReaderMatchesOpen(t *testing.T) {
	defer func(at int) { indexStreamAt = at }(indexStreamAt)
	rng := rand.New(rand.NewPCG(9, 41))
	for iter := range 12 {
		series := randomSeries(rng, 1+rng.IntN(300), 1+rng.IntN(200))
		indexStreamAt = []int{1 << 20, 64, 4 << 10}[iter%3]
		opts := WriterOptions{
			BlockSamples: []int{0, 7, 100}[rng.IntN(3)],
			InlineBytes:  []int{0, -1, 4096}[rng.IntN(3)],
			Series:       []int{0, len(series), 3}[rng.IntN(3)],
		}
		checkFinishReader(t, "add", opts, addAll(series))
		checkFinishReader(t, "parallel", opts, func(w *Writer) error {
			p := NewParallel(w, 1+iter%3)
			for _, s := range series {
				if err := p.Add(s.key, s.kind, s.samples); err != nil {
					p.Abort()
					return err
				}
			}
			return p.Close()
		})
	}

	indexStreamAt = 64
	checkFinishReader(t, "empty", WriterOptions{}, func(*Writer) error { return nil })

	// Random keys and times, and no stats: the streamed index does not
	// compress and is stored raw, recovered from the stream.
	var noisy []testSeries
	for i := range 400 {
		key := make([]byte, 40)
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		key[0], key[1] = byte(i>>8), byte(i)
		noisy = append(noisy, testSeries{key: key, kind: point.KindString, samples: []point.Sample{{Time: rng.Int64(), Value: point.String("v")}}})
	}
	if file := checkFinishReader(t, "incompressible", WriterOptions{InlineBytes: -1}, addAll(noisy)); indexCompressed(t, file) {
		t.Fatal("the incompressible index was compressed: the raw path is not tested")
	}

	// Rollups before samples, and a series of rollups alone.
	kinds := []point.Kind{point.KindFloat, point.KindInt, point.KindUint}
	var rollups [][]Rollup
	for _, k := range kinds {
		rollups = append(rollups, testRollups(rng, k, 30, 60e9, 0))
	}
	checkFinishReader(t, "rollups", WriterOptions{BlockSamples: 16}, func(w *Writer) error {
		for i, k := range kinds {
			key := []byte{'a' + byte(i)}
			rus := rollups[i]
			if err := w.AddRollups(key, k, rus); err != nil {
				return err
			}
			if i == 2 {
				continue
			}
			if err := w.Add(key, k, []point.Sample{{Time: 40 * 60e9, Value: rus[0].First}}); err != nil {
				return err
			}
		}
		return nil
	})

	// Blocks copied as stored from another segment.
	data, err := os.ReadFile("testdata/v3.seg")
	if err != nil {
		t.Fatal(err)
	}
	src := newMemFS()
	src.put("/db/src.seg", data)
	r, err := Open(src, "/db/src.seg")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	checkFinishReader(t, "copied", WriterOptions{BlockSamples: fixtureBlockSamples}, func(w *Writer) error {
		for i := range r.NumSeries() {
			s := r.Series(i)
			for b := range s.Blocks {
				if !s.Blocks[b].Inline() {
					if err := w.CopyBlock(s.Key, s.Kind, r, s, b); err != nil {
						return err
					}
					continue
				}
				samples, err := r.ReadBlock(s, b, nil)
				if err != nil {
					return err
				}
				if err := w.Add(s.Key, s.Kind, samples); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// TestFinishReaderErrors: a failed Finish returns no Reader and leaves no
// file.
func TestFinishReaderErrors(t *testing.T) {
	defer func(at int) { indexStreamAt = at }(indexStreamAt)
	indexStreamAt = 64
	series := randomSeries(rand.New(rand.NewPCG(3, 3)), 50, 20)
	boom := errors.New("boom")
	for _, op := range []vfs.Op{vfs.OpSync, vfs.OpRename, vfs.OpSyncDir, vfs.OpOpen} {
		mem := newMemFS()
		fs := vfs.Inject(mem, func(o vfs.Op, _ string) error {
			if o == op {
				return boom
			}
			return nil
		})
		w, err := Create("/db/e.seg", WriterOptions{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		if err := addAll(series)(w); err != nil {
			t.Fatal(err)
		}
		r, err := w.FinishReader()
		if r != nil || !errors.Is(err, boom) {
			t.Fatalf("op %v: reader %v, err %v", op, r, err)
		}
		_, statErr := mem.Stat("/db/e.seg")
		if published := statErr == nil; published != (op == vfs.OpOpen) {
			t.Fatalf("op %v: published %v", op, published)
		}
		if _, err := w.FinishReader(); !errors.Is(err, errFinished) && !errors.Is(err, boom) {
			t.Fatalf("op %v: FinishReader again: %v", op, err)
		}
	}

	// Aborted after streaming part of its index, a Writer leaves no file.
	mem := newMemFS()
	w, err := Create("/db/a.seg", WriterOptions{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	if err := addAll(series)(w); err != nil {
		t.Fatal(err)
	}
	if w.indexRaw == 0 {
		t.Fatal("nothing of the index was streamed")
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if names, err := mem.ReadDir("/db"); err != nil || len(names) != 0 {
		t.Fatalf("after Abort: %v %v", names, err)
	}
}
