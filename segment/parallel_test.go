package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
)

// parallelDataset is many short series of every kind (more batches than a
// Parallel's window), long ones cut into several blocks, one long enough
// to fill a batch by samples, and strings cut by size.
func parallelDataset() []testSeries {
	rng := rand.New(rand.NewPCG(23, 5))
	series := randomSeries(rng, 3000, 30)
	for i := 0; i < len(series); i += 300 {
		series[i].samples = randomSamples(rng, series[i].kind, 2500)
	}
	series[7].kind = point.KindFloat
	series[7].samples = randomSamples(rng, point.KindFloat, parBatchSamples+1234)
	big := series[11]
	big.kind = point.KindString
	big.samples = randomSamples(rng, point.KindString, 9)
	for j := range big.samples {
		big.samples[j].Value = point.String(strings.Repeat(string(rune('a'+j)), 300<<10))
	}
	series[11] = big
	return series
}

// writeParallel writes series through a Parallel of the given workers,
// reusing one sample buffer (scribbled over after each Add) as a flush
// does.
func writeParallel(t testing.TB, fs *memFS, name string, opts WriterOptions, workers int, series []testSeries) Meta {
	t.Helper()
	opts.FS = fs
	w, err := Create(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	p := NewParallel(w, workers)
	var buf []point.Sample
	for _, s := range series {
		buf = append(buf[:0], s.samples...)
		if err := p.Add(s.key, s.kind, buf); err != nil {
			t.Fatalf("add %q: %v", s.key, err)
		}
		for j := range buf {
			buf[j] = point.Sample{Time: -1, Value: point.Int(-1)}
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	meta, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

// TestParallelByteIdentical writes the same series with Writer.Add and
// through Parallel (1 to 3 workers, several block and inline sizes) and
// requires the same file, byte for byte, and the same Meta.
func TestParallelByteIdentical(t *testing.T) {
	series := parallelDataset()
	for _, opts := range []WriterOptions{
		{},
		{BlockSamples: 7},
		{InlineBytes: -1},
		{BlockSamples: 100, InlineBytes: 4096, Series: len(series)},
	} {
		fs := newMemFS()
		opts.FS = fs
		w, err := Create("/db/seq", opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range series {
			if err := w.Add(s.key, s.kind, s.samples); err != nil {
				t.Fatal(err)
			}
		}
		wantMeta, err := w.Finish()
		if err != nil {
			t.Fatal(err)
		}
		want := fs.bytes(t, "/db/seq")
		for workers := 1; workers <= 3; workers++ {
			name := fmt.Sprintf("/db/par%d", workers)
			meta := writeParallel(t, fs, name, opts, workers, series)
			got := fs.bytes(t, name)
			if !bytes.Equal(got, want) {
				i := 0
				for i < min(len(got), len(want)) && got[i] == want[i] {
					i++
				}
				t.Fatalf("opts %+v, %d workers: %d bytes differ from the sequential %d at byte %d", opts, workers, len(got), len(want), i)
			}
			meta.Path = wantMeta.Path
			if fmt.Sprint(meta) != fmt.Sprint(wantMeta) {
				t.Fatalf("opts %+v, %d workers: meta %+v, sequential %+v", opts, workers, meta, wantMeta)
			}
		}
		checkStats(t, openAndCheck(t, fs, "/db/par2", series))
	}
}

// TestParallelRejects checks that Parallel.Add validates as Writer.Add
// does, leaving what was added intact, and that Abort leaves no file.
func TestParallelRejects(t *testing.T) {
	fs := newMemFS()
	w, err := Create("/db/seg", WriterOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add([]byte("a"), point.KindInt, []point.Sample{{Time: 1, Value: point.Int(1)}}); err != nil {
		t.Fatal(err)
	}
	p := NewParallel(w, 2)
	ok := []point.Sample{{Time: 1, Value: point.Float(1)}, {Time: 2, Value: point.Float(2)}}
	for name, add := range map[string]func() error{
		"key not after the writer's": func() error { return p.Add([]byte("a"), point.KindFloat, ok) },
		"empty key":                  func() error { return p.Add(nil, point.KindFloat, ok) },
		"bad kind":                   func() error { return p.Add([]byte("b"), point.Kind(99), ok) },
		"sample of another kind":     func() error { return p.Add([]byte("b"), point.KindInt, ok) },
		"times not increasing": func() error {
			return p.Add([]byte("b"), point.KindFloat, []point.Sample{ok[1], ok[0]})
		},
	} {
		if err := add(); !errors.Is(err, base.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if err := p.Add([]byte("b"), point.KindFloat, ok); err != nil {
		t.Fatal(err)
	}
	if err := p.Add([]byte("b"), point.KindFloat, ok); !errors.Is(err, base.ErrInvalid) {
		t.Errorf("repeated key: %v, want ErrInvalid", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Add([]byte("c"), point.KindFloat, ok); err == nil {
		t.Error("add after close succeeded")
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	openAndCheck(t, fs, "/db/seg", []testSeries{
		{key: []byte("a"), kind: point.KindInt, samples: []point.Sample{{Time: 1, Value: point.Int(1)}}},
		{key: []byte("b"), kind: point.KindFloat, samples: ok},
	})

	w, err = Create("/db/aborted", WriterOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	p = NewParallel(w, 2)
	for i := range 2000 {
		if err := p.Add(fmt.Appendf(nil, "k%05d", i), point.KindFloat, ok); err != nil {
			t.Fatal(err)
		}
	}
	p.Abort()
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"/db/aborted", "/db/aborted.tmp"} {
		if _, err := fs.Stat(name); err == nil {
			t.Errorf("%s exists after abort", name)
		}
	}
}
