package segment

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stratadb/strata/internal/point"
)

// TestKeptBloom: a Writer with KeepIndex and a Series hint sets its bloom
// filter as series end, keeping no hashes, and writes the file a Writer
// without either writes, byte for byte, whether the hint is exact, gives
// the same filter size, or is off (the filter is built again from the
// kept keys); its Reader finds every key.
func TestKeptBloom(t *testing.T) {
	const n = 3000
	var series []testSeries
	for i := range n {
		series = append(series, testSeries{key: fmt.Appendf(nil, "m,host=h%05d f", i), kind: point.KindFloat,
			samples: []point.Sample{{Time: int64(i), Value: point.Float(float64(i))}}})
	}
	write := func(fs *memFS, name string, opts WriterOptions) *Reader {
		opts.FS = fs
		w, err := Create(name, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := addAll(series)(w); err != nil {
			t.Fatal(err)
		}
		if opts.KeepIndex && opts.Series > 0 && (w.hashes != nil || w.bloomWords == nil) {
			t.Fatalf("hint %d: the Writer kept %d hashes", opts.Series, len(w.hashes))
		}
		r, err := w.FinishReader()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	defer func(at int) { indexStreamAt = at }(indexStreamAt)
	for _, at := range []int{1 << 20, 4 << 10} {
		indexStreamAt = at // the index held whole, and streamed as it grows
		checkKeptBloom(t, write, n)
	}
}

func checkKeptBloom(t *testing.T, write func(fs *memFS, name string, opts WriterOptions) *Reader, n int) {
	plain := newMemFS()
	write(plain, "p.seg", WriterOptions{}).Close()
	want := plain.bytes(t, "p.seg")
	keys := func(r *Reader) {
		for i := range n {
			if key := fmt.Appendf(nil, "m,host=h%05d f", i); !r.MayContain(key) {
				t.Fatalf("the bloom filter misses %q", key)
			}
		}
	}
	for _, hint := range []int{n, n + 1, n - 1, 2 * n, 1, 100 * n} {
		fs := newMemFS()
		r := write(fs, "k.seg", WriterOptions{Series: hint, KeepIndex: true})
		if got := fs.bytes(t, "k.seg"); !bytes.Equal(got, want) {
			t.Fatalf("hint %d: another file", hint)
		}
		keys(r)
		r.Close()
	}
}
