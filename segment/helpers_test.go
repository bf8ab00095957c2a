package segment

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/internal/xsum"
)

// memFS is vfs.MemFS with /db created, plus helpers that let tests read
// and damage file bytes directly.
type memFS struct{ *vfs.MemFS }

func newMemFS() *memFS {
	m := vfs.NewMem()
	if err := m.MkdirAll("/db", 0o755); err != nil {
		panic(err)
	}
	return &memFS{m}
}

// bytes returns a copy of a file's contents.
func (m *memFS) bytes(t testing.TB, name string) []byte {
	t.Helper()
	data, err := vfs.ReadFile(m, name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// put stores data as a file.
func (m *memFS) put(name string, data []byte) {
	f, err := m.Create(name)
	if err == nil {
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		panic(err)
	}
}

// testSeries is one series given to or read back from a segment.
type testSeries struct {
	key     []byte
	kind    point.Kind
	samples []point.Sample
}

// writeSegment writes series (sorted by key) with the given block size and
// returns the file's metadata.
func writeSegment(t testing.TB, fs vfs.FS, name string, blockSamples int, series []testSeries) Meta {
	t.Helper()
	w, err := Create(name, WriterOptions{FS: fs, BlockSamples: blockSamples})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range series {
		if err := w.Add(s.key, s.kind, s.samples); err != nil {
			t.Fatalf("add %q: %v", s.key, err)
		}
	}
	meta, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

// readAll reads every series of r through iter over the whole time range.
// openAndCheck opens name, checks that it holds exactly want, and returns
// the reader, closed when the test ends.
func openAndCheck(t testing.TB, fs vfs.FS, name string, want []testSeries) *Reader {
	t.Helper()
	r, err := Open(fs, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	got, err := readAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffSeries(want, got); d != "" {
		t.Fatal(d)
	}
	return r
}

func readAll(r *Reader) ([]testSeries, error) {
	out := make([]testSeries, 0, r.NumSeries())
	for i := range r.NumSeries() {
		s := r.Series(i)
		ts := testSeries{key: bytes.Clone(s.Key), kind: s.Kind}
		it := r.iter(s, math.MinInt64, math.MaxInt64)
		for it.Next() {
			ts.samples = append(ts.samples, it.At())
		}
		if err := it.Close(); err != nil {
			return out, err
		}
		out = append(out, ts)
	}
	return out, nil
}

// diffSeries describes the first difference between want and got, or "".
func diffSeries(want, got []testSeries) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d series, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if !bytes.Equal(w.key, g.key) || w.kind != g.kind {
			return fmt.Sprintf("series %d is %q (%v), want %q (%v)", i, g.key, g.kind, w.key, w.kind)
		}
		if len(w.samples) != len(g.samples) {
			return fmt.Sprintf("series %q: %d samples, want %d", w.key, len(g.samples), len(w.samples))
		}
		for j := range w.samples {
			ws, gs := w.samples[j], g.samples[j]
			if ws.Time != gs.Time || !sameValue(ws.Value, gs.Value) {
				return fmt.Sprintf("series %q sample %d: %d=%v, want %d=%v", w.key, j, gs.Time, gs.Value, ws.Time, ws.Value)
			}
		}
	}
	return ""
}

// sameValue compares values exactly: floats by bit pattern.
func sameValue(a, b point.Value) bool {
	if a.Kind() != b.Kind() {
		return false
	}
	if a.Kind() == point.KindString {
		return a.Str() == b.Str()
	}
	return a.Bits() == b.Bits()
}

// checkStats recomputes every block's statistics from its samples.
func checkStats(t testing.TB, r *Reader) {
	t.Helper()
	for i := range r.NumSeries() {
		s := r.Series(i)
		for b := range s.Blocks {
			bm := s.Blocks[b]
			samples, err := r.ReadBlock(s, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(samples) != bm.Count || samples[0].Time != bm.MinTime || samples[len(samples)-1].Time != bm.MaxTime {
				t.Fatalf("%q block %d: meta %+v for %d samples %d..%d", s.Key, b, bm, len(samples), samples[0].Time, samples[len(samples)-1].Time)
			}
			var mn, mx, sum point.Value
			switch s.Kind {
			case point.KindFloat:
				lo, hi, su := samples[0].Value.Float(), samples[0].Value.Float(), samples[0].Value.Float()
				for _, x := range samples[1:] {
					lo, hi, su = min(lo, x.Value.Float()), max(hi, x.Value.Float()), su+x.Value.Float()
				}
				mn, mx, sum = point.Float(lo), point.Float(hi), point.Float(su)
			case point.KindInt:
				lo, hi, su := samples[0].Value.Int(), samples[0].Value.Int(), samples[0].Value.Int()
				for _, x := range samples[1:] {
					lo, hi, su = min(lo, x.Value.Int()), max(hi, x.Value.Int()), su+x.Value.Int()
				}
				mn, mx, sum = point.Int(lo), point.Int(hi), point.Int(su)
			case point.KindUint:
				lo, hi, su := samples[0].Value.Uint(), samples[0].Value.Uint(), samples[0].Value.Uint()
				for _, x := range samples[1:] {
					lo, hi, su = min(lo, x.Value.Uint()), max(hi, x.Value.Uint()), su+x.Value.Uint()
				}
				mn, mx, sum = point.Uint(lo), point.Uint(hi), point.Uint(su)
			}
			if s.Kind == point.KindFloat {
				// A NaN is stored as math.NaN() whatever the payloads.
				if math.IsNaN(mn.Float()) {
					mn, mx = point.Float(math.NaN()), point.Float(math.NaN())
				}
				if math.IsNaN(sum.Float()) {
					sum = point.Float(math.NaN())
				}
				if r.tab().version >= exactSumVersion {
					checkPartial(t, s.Key, b, &bm, samples)
					sum = point.Value{}
				} else if bm.Partial != nil {
					t.Fatalf("%q block %d: a partial sum in format %d", s.Key, b, r.tab().version)
				}
			}
			if !sameValue(bm.Min, mn) || !sameValue(bm.Max, mx) || !sameValue(bm.Sum, sum) {
				t.Fatalf("%q block %d: stats %v/%v/%v, want %v/%v/%v", s.Key, b, bm.Min, bm.Max, bm.Sum, mn, mx, sum)
			}
		}
	}
}

// randomSeries builds n series of random kinds, keys and samples.
func randomSeries(rng *rand.Rand, n, maxSamples int) []testSeries {
	keys := map[string]bool{}
	for len(keys) < n {
		keys[fmt.Sprintf("m%d,host=h%d f%d", rng.IntN(5), rng.IntN(1000), rng.IntN(3))] = true
	}
	sorted := make([]string, 0, n)
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	out := make([]testSeries, n)
	for i, k := range sorted {
		kind := point.Kind(1 + rng.IntN(5))
		out[i] = testSeries{key: []byte(k), kind: kind, samples: randomSamples(rng, kind, 1+rng.IntN(maxSamples))}
	}
	return out
}

func randomSamples(rng *rand.Rand, kind point.Kind, n int) []point.Sample {
	out := make([]point.Sample, n)
	t := rng.Int64() - math.MaxInt64/2
	style := rng.IntN(3)
	base := rng.Float64() * 100
	for i := range out {
		switch style {
		case 0: // regular
			t += 1000
		case 1: // jittered
			t += 1 + rng.Int64N(1<<20)
		default: // wild
			t += 1 + rng.Int64N(1<<40)
		}
		out[i].Time = t
		var v point.Value
		switch kind {
		case point.KindFloat:
			switch style {
			case 0:
				base += float64(rng.IntN(21)-10) / 10
				v = point.Float(math.Round(base*10) / 10)
			case 1:
				v = point.Float(base + rng.NormFloat64())
			default:
				v = point.Float(math.Float64frombits(rng.Uint64()))
			}
		case point.KindInt:
			if style == 2 {
				v = point.Int(int64(rng.Uint64()))
			} else {
				v = point.Int(int64(base) + rng.Int64N(100) - 50)
			}
		case point.KindUint:
			if style == 2 {
				v = point.Uint(rng.Uint64())
			} else {
				v = point.Uint(uint64(i) * 7)
			}
		case point.KindBool:
			v = point.Bool(rng.IntN(2) == 0)
		case point.KindString:
			v = point.String(strings.Repeat(string(rune('a'+rng.IntN(26))), rng.IntN(12)))
		}
		out[i].Value = v
	}
	return out
}

// checkPartial checks a float block's exact sum against math/big: the
// partial is the canonical encoding of the samples' sum and rounds to the
// exactly rounded sum.
func checkPartial(t testing.TB, key []byte, b int, bm *BlockMeta, samples []point.Sample) {
	t.Helper()
	var acc xsum.Acc
	var exact big.Float
	var n big.Int
	special := false
	for _, s := range samples {
		x := s.Value.Float()
		acc.Add(x)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			special = true
			continue
		}
		f := new(big.Float).SetFloat64(x)
		v, _ := f.SetMantExp(f, 1074).Int(nil)
		n.Add(&n, v)
	}
	if want := acc.AppendBinary(nil); !bytes.Equal(bm.Partial, want) {
		t.Fatalf("%q block %d: partial %x, want %x", key, b, bm.Partial, want)
	}
	got := bm.FloatSum()
	if special {
		if want := acc.Float64(); !sameValue(point.Float(got), point.Float(want)) && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("%q block %d: sum %v, want %v", key, b, got, want)
		}
		return
	}
	exact.SetInt(&n)
	exact.SetMantExp(&exact, -1074)
	want, _ := exact.Float64()
	if n.Sign() == 0 {
		want = 0
	}
	if math.Float64bits(got) != math.Float64bits(want) {
		t.Fatalf("%q block %d: sum %v, want the exact %v", key, b, got, want)
	}
}
