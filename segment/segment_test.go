package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
)

func TestIoTCompression(t *testing.T) {
	series := iotDataset(1000, 1000)
	fs := newMemFS()
	meta := writeSegment(t, fs, "/db/iot.seg", 0, series)
	const points = 1000 * 1000
	perPoint := float64(meta.Size) / points
	t.Logf("IoT dataset: %d bytes for %d points = %.3f bytes/point (index, bloom and footer included)", meta.Size, points, perPoint)
	if perPoint > 1.2 {
		t.Fatalf("%.3f bytes/point exceeds 1.2", perPoint)
	}
	if meta.Samples != points || meta.Series != 1000 {
		t.Fatalf("meta %+v", meta)
	}
	openAndCheck(t, fs, "/db/iot.seg", series)
}

// roundTrip writes series, checks both Metas, reads everything back and
// checks every block's stats.
func roundTrip(t *testing.T, blockSamples int, series []testSeries) *Reader {
	t.Helper()
	fs := newMemFS()
	wmeta := writeSegment(t, fs, "/db/x.seg", blockSamples, series)
	r, err := Open(fs, "/db/x.seg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	got, err := readAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffSeries(series, got); d != "" {
		t.Fatal(d)
	}
	checkStats(t, r)
	want := expectedMeta(series)
	want.Path, want.Size = "/db/x.seg", int64(len(fs.bytes(t, "/db/x.seg")))
	for _, m := range []Meta{wmeta, r.Meta()} {
		if m.Path != want.Path || m.Size != want.Size || m.MinTime != want.MinTime || m.MaxTime != want.MaxTime ||
			m.Series != want.Series || m.Samples != want.Samples ||
			!bytes.Equal(m.FirstKey, want.FirstKey) || !bytes.Equal(m.LastKey, want.LastKey) {
			t.Fatalf("meta %+v, want %+v", m, want)
		}
	}
	if blockSamples == 0 {
		blockSamples = DefaultBlockSamples
	}
	for i := range r.NumSeries() {
		for _, b := range r.Series(i).Blocks {
			if b.Count > blockSamples {
				t.Fatalf("block of %d samples, limit %d", b.Count, blockSamples)
			}
		}
	}
	return r
}

func expectedMeta(series []testSeries) Meta {
	var m Meta
	for _, s := range series {
		if len(s.samples) == 0 {
			continue
		}
		first, last := s.samples[0].Time, s.samples[len(s.samples)-1].Time
		if m.Series == 0 {
			m.MinTime, m.MaxTime, m.FirstKey = first, last, s.key
		}
		m.MinTime, m.MaxTime = min(m.MinTime, first), max(m.MaxTime, last)
		m.LastKey = s.key
		m.Series++
		m.Samples += int64(len(s.samples))
	}
	return m
}

func samplesOf(times []int64, vals ...point.Value) []point.Sample {
	out := make([]point.Sample, len(vals))
	for i, v := range vals {
		out[i] = point.Sample{Time: times[i%len(times)] + int64(i/len(times))*(1<<40), Value: v}
	}
	return out
}

func seqTimes(start, step int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = start + int64(i)*step
	}
	return out
}

func TestRoundTripKinds(t *testing.T) {
	negZero := math.Copysign(0, -1)
	long := strings.Repeat("0123456789abcdef", 100<<10/16) // 100 KiB
	floats := []point.Value{
		point.Float(math.NaN()), point.Float(math.Inf(1)), point.Float(math.Inf(-1)), point.Float(negZero),
		point.Float(0), point.Float(math.MaxFloat64), point.Float(-math.MaxFloat64), point.Float(math.SmallestNonzeroFloat64),
		point.Float(math.Float64frombits(0x7ff0000000000001)), point.Float(1.5), point.Float(1.5), point.Float(20.01),
	}
	decimals := []point.Value{point.Float(20.01), point.Float(19.99), point.Float(-3.5), point.Float(0), point.Float(1e12)}
	ints := []point.Value{
		point.Int(math.MinInt64), point.Int(math.MaxInt64), point.Int(0), point.Int(-1), point.Int(1),
		point.Int(math.MaxInt64), point.Int(math.MinInt64), point.Int(42),
	}
	uints := []point.Value{point.Uint(0), point.Uint(math.MaxUint64), point.Uint(1), point.Uint(math.MaxUint64), point.Uint(0), point.Uint(1 << 63)}
	bools := []point.Value{point.Bool(true), point.Bool(false), point.Bool(false), point.Bool(true), point.Bool(true)}
	strs := []point.Value{point.String(""), point.String(long), point.String(""), point.String("héllo, wörld"), point.String("\x00\xff\n"), point.String(long[:7])}
	extremes := []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}
	negative := seqTimes(-1_000_000, 7, 20)
	shared := seqTimes(1_700_000_000_000_000_000, 1e9, 8) // the same times in every series

	series := []testSeries{
		{key: []byte("a,k=1 bool"), kind: point.KindBool, samples: samplesOf(shared, bools...)},
		{key: []byte("a,k=1 decimal"), kind: point.KindFloat, samples: samplesOf(shared, decimals...)},
		{key: []byte("a,k=1 float"), kind: point.KindFloat, samples: samplesOf(extremes, floats[:7]...)},
		{key: []byte("a,k=1 float2"), kind: point.KindFloat, samples: samplesOf(negative, floats...)},
		{key: []byte("a,k=1 int"), kind: point.KindInt, samples: samplesOf(extremes, ints[:7]...)},
		{key: []byte("a,k=1 int2"), kind: point.KindInt, samples: samplesOf(shared, ints...)},
		{key: []byte("a,k=1 string"), kind: point.KindString, samples: samplesOf(shared, strs...)},
		{key: []byte("a,k=1 uint"), kind: point.KindUint, samples: samplesOf(extremes, uints...)},
		{key: []byte("a,k=1 uint2"), kind: point.KindUint, samples: samplesOf(negative, uints...)},
		{key: []byte("b bool"), kind: point.KindBool, samples: samplesOf(negative, bools...)},
		{key: []byte("b string"), kind: point.KindString, samples: samplesOf(extremes, strs...)},
	}
	for _, bs := range []int{0, 1, 2, 3, 5} {
		t.Run(fmt.Sprintf("block%d", bs), func(t *testing.T) { roundTrip(t, bs, series) })
	}
}

func TestSingleSampleSeries(t *testing.T) {
	var series []testSeries
	for k := point.KindFloat; k <= point.KindString; k++ {
		v := []point.Value{{}, point.Float(-2.5), point.Int(-7), point.Uint(7), point.Bool(true), point.String("x")}[k]
		series = append(series, testSeries{key: fmt.Appendf(nil, "m f%d", k), kind: k, samples: []point.Sample{{Time: int64(k) * -1000, Value: v}}})
	}
	r := roundTrip(t, 0, series)
	for i := range r.NumSeries() {
		s := r.Series(i)
		if len(s.Blocks) != 1 || s.Blocks[0].Count != 1 || s.MinTime() != s.MaxTime() {
			t.Fatalf("%q: blocks %+v", s.Key, s.Blocks)
		}
	}
}

func TestManySeries(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	const n = 5000
	series := make([]testSeries, n)
	for i := range series {
		key := point.AppendSeriesKey(nil, "m", []point.Tag{{Key: "id", Value: fmt.Sprintf("%06d", i)}}, "v")
		series[i] = testSeries{key: key, kind: point.KindInt, samples: randomSamples(rng, point.KindInt, 1+rng.IntN(3))}
	}
	r := roundTrip(t, 0, series)
	for i, s := range series {
		got, ok := r.Find(s.key)
		if !ok || !bytes.Equal(got.Key, s.key) || !reflect.DeepEqual(got, r.Series(i)) {
			t.Fatalf("Find(%q) = %v, %v", s.key, got, ok)
		}
	}
	falsePos := 0
	const absent = 20000
	for i := range absent {
		key := point.AppendSeriesKey(nil, "m", []point.Tag{{Key: "id", Value: fmt.Sprintf("x%06d", i)}}, "v")
		if r.MayContain(key) {
			falsePos++
		}
		if _, ok := r.Find(key); ok {
			t.Fatalf("Find(%q) found an absent key", key)
		}
	}
	rate := float64(falsePos) / absent
	t.Logf("bloom false positives: %d of %d absent keys (%.2f%%)", falsePos, absent, 100*rate)
	if rate > 0.02 {
		t.Fatalf("bloom false-positive rate %.2f%% is far above 1%%", 100*rate)
	}
}

// TestSeriesInto decodes every entry into one reused SeriesIndex, in an
// order that alternates series of one and of several blocks, and checks
// each against a fresh decode and its key against Key.
func TestSeriesInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	series := make([]testSeries, 300)
	for i := range series {
		key := point.AppendSeriesKey(nil, "m", []point.Tag{{Key: "id", Value: fmt.Sprintf("%04d", i)}}, "v")
		series[i] = testSeries{key: key, kind: point.KindFloat, samples: randomSamples(rng, point.KindFloat, 1+rng.IntN(40))}
	}
	r := roundTrip(t, 8, series)
	var si SeriesIndex
	for _, i := range rng.Perm(r.NumSeries()) {
		want := r.Series(i)
		if got := r.SeriesInto(i, &si); got != &si || !reflect.DeepEqual(*got, *want) {
			t.Fatalf("SeriesInto(%d) = %+v, want %+v", i, *got, *want)
		}
		if !bytes.Equal(r.Key(i), want.Key) {
			t.Fatalf("Key(%d) = %q, want %q", i, r.Key(i), want.Key)
		}
		var found SeriesIndex
		if !r.FindInto(want.Key, &found) || !reflect.DeepEqual(found, *want) {
			t.Fatalf("FindInto(%q) = %+v", want.Key, found)
		}
		// AppendRange gives what Iter gives, after what dst held.
		// Bounds on, just before and just after samples, inside blocks.
		all := series[slices.IndexFunc(series, func(ts testSeries) bool { return bytes.Equal(ts.key, want.Key) })].samples
		a, b := rng.IntN(len(all)), rng.IntN(len(all))
		lo, hi := all[min(a, b)].Time+rng.Int64N(3)-1, all[max(a, b)].Time+rng.Int64N(3)-1
		var iter []point.Sample
		it := r.iter(want, lo, hi)
		for it.Next() {
			iter = append(iter, it.At())
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		prefix := []point.Sample{{Time: -1}}
		got, err := r.AppendRange(want, lo, hi, slices.Clone(prefix))
		if err != nil || !reflect.DeepEqual(got, append(prefix, iter...)) {
			t.Fatalf("AppendRange(%q, %d, %d) = %v, %v; Iter gives %v", want.Key, lo, hi, got, err, iter)
		}
	}
	if r.FindInto([]byte("absent"), &si) {
		t.Fatal("FindInto found an absent key")
	}
}

func TestBlockSizeLimits(t *testing.T) {
	for _, bs := range []int{1, 7, 16} {
		for _, n := range []int{bs - 1, bs, bs + 1, 2 * bs, 2*bs + 1} {
			if n == 0 {
				continue
			}
			series := []testSeries{{key: []byte("m f"), kind: point.KindFloat, samples: randomSamples(rand.New(rand.NewPCG(uint64(n), 2)), point.KindFloat, n)}}
			r := roundTrip(t, bs, series)
			s := r.Series(0)
			if want := (n + bs - 1) / bs; len(s.Blocks) != want {
				t.Fatalf("block size %d, %d samples: %d blocks, want %d", bs, n, len(s.Blocks), want)
			}
			for i, b := range s.Blocks {
				if want := min(bs, n-i*bs); b.Count != want {
					t.Fatalf("block size %d, %d samples: block %d holds %d, want %d", bs, n, i, b.Count, want)
				}
			}
		}
	}
	// The largest block the format allows, and one sample more.
	n := MaxBlockSamples + 1
	series := []testSeries{{key: []byte("m f"), kind: point.KindInt, samples: randomSamples(rand.New(rand.NewPCG(9, 9)), point.KindInt, n)}}
	r := roundTrip(t, MaxBlockSamples, series)
	if b := r.Series(0).Blocks; len(b) != 2 || b[0].Count != MaxBlockSamples || b[1].Count != 1 {
		t.Fatalf("blocks %d", len(b))
	}
}

func TestStringBlocksCutBySize(t *testing.T) {
	big := strings.Repeat("z", 300<<10)
	samples := make([]point.Sample, 10)
	for i := range samples {
		samples[i] = point.Sample{Time: int64(i), Value: point.String(big[:len(big)-i])}
	}
	r := roundTrip(t, 0, []testSeries{{key: []byte("m s"), kind: point.KindString, samples: samples}})
	// 300 KiB strings: a block is cut once it holds 1 MiB, so 4 per block.
	if got := len(r.Series(0).Blocks); got != 3 {
		t.Fatalf("%d blocks, want 3", got)
	}
}

func TestPropertyRandomSegments(t *testing.T) {
	iters := 40
	if testing.Short() {
		iters = 10
	}
	defer func(at int) { indexStreamAt = at }(indexStreamAt)
	for iter := range iters {
		rng := rand.New(rand.NewPCG(uint64(iter), 77))
		series := randomSeries(rng, 1+rng.IntN(12), 1+rng.IntN(400))
		// Every other file streams its index to the compressor.
		indexStreamAt = []int{1 << 20, 64}[iter%2]
		bs := []int{0, 1 + rng.IntN(8), 1 + rng.IntN(100), 1 + rng.IntN(1000)}[rng.IntN(4)]
		// Feed each series in random pieces, exercising continuation.
		fs := newMemFS()
		w, err := Create("/db/p.seg", WriterOptions{FS: fs, BlockSamples: bs})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range series {
			rest := s.samples
			for len(rest) > 0 {
				c := 1 + rng.IntN(len(rest))
				if err := w.Add(s.key, s.kind, rest[:c]); err != nil {
					t.Fatalf("iter %d: %v", iter, err)
				}
				rest = rest[c:]
			}
		}
		if _, err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		r, err := Open(fs, "/db/p.seg")
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		got, err := readAll(r)
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		if d := diffSeries(series, got); d != "" {
			t.Fatalf("iter %d (block size %d): %s", iter, bs, d)
		}
		checkStats(t, r)
		// The same series written in one call per series give the same file.
		other := newMemFS()
		writeSegment(t, other, "/db/p.seg", bs, series)
		if !bytes.Equal(fs.bytes(t, "/db/p.seg"), other.bytes(t, "/db/p.seg")) {
			t.Fatalf("iter %d: pieces and whole series give different files", iter)
		}
		r.Close()
	}
}

// countReads wraps fs to count positional reads.
func countReads(fs vfs.FS) (vfs.FS, *atomic.Int64) {
	var n atomic.Int64
	return vfs.Inject(fs, func(op vfs.Op, _ string) error {
		if op == vfs.OpRead {
			n.Add(1)
		}
		return nil
	}), &n
}

func TestIterBounds(t *testing.T) {
	// Times 0, 10, ..., 990 in blocks of 10: block b spans 100b..100b+90.
	samples := make([]point.Sample, 100)
	for i := range samples {
		samples[i] = point.Sample{Time: int64(i) * 10, Value: point.Int(int64(i))}
	}
	mem := newMemFS()
	w, err := Create("/db/i.seg", WriterOptions{FS: mem, BlockSamples: 10, InlineBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add([]byte("m f"), point.KindInt, samples); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	fs, reads := countReads(mem)
	r, err := Open(fs, "/db/i.seg")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := r.Series(0)
	for _, b := range s.Blocks {
		if b.inline != nil {
			t.Fatal("InlineBytes -1 wrote an inline block")
		}
	}
	cases := []struct {
		mint, maxt int64
		want       []int64 // expected times
		blocks     int64   // blocks decoded
	}{
		{math.MinInt64, math.MaxInt64, seqTimes(0, 10, 100), 10},
		{0, 0, []int64{0}, 1},
		{990, 990, []int64{990}, 1},
		{10, 30, []int64{10, 20, 30}, 1},
		{15, 35, []int64{20, 30}, 1},
		{41, 49, nil, 1}, // inside a block, between samples
		{95, 99, nil, 0}, // between blocks
		{95, 105, []int64{100}, 1},
		{90, 100, []int64{90, 100}, 2},
		{150, 250, seqTimes(150, 10, 11), 2},
		{985, math.MaxInt64, []int64{990}, 1},
		{-100, -1, nil, 0},
		{991, 5000, nil, 0},
		{math.MaxInt64, math.MaxInt64, nil, 0},
		{math.MinInt64, math.MinInt64, nil, 0},
		{30, 10, nil, 0}, // empty range
	}
	for _, c := range cases {
		before := reads.Load()
		it := r.iter(s, c.mint, c.maxt)
		var got []int64
		for it.Next() {
			got = append(got, it.At().Time)
			if v := it.At().Value.Int(); v*10 != it.At().Time {
				t.Fatalf("[%d,%d]: value %d at %d", c.mint, c.maxt, v, it.At().Time)
			}
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		if it.Next() {
			t.Fatal("Next after Close")
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("[%d,%d]: got %v, want %v", c.mint, c.maxt, got, c.want)
		}
		if n := reads.Load() - before; n != c.blocks {
			t.Errorf("[%d,%d]: decoded %d blocks, want %d", c.mint, c.maxt, n, c.blocks)
		}
	}
}

func TestReadBlockOutOfRange(t *testing.T) {
	r := roundTrip(t, 0, []testSeries{{key: []byte("m f"), kind: point.KindBool, samples: samplesOf([]int64{1}, point.Bool(true))}})
	if _, err := r.ReadBlock(r.Series(0), 1, nil); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("block 1 of 1: %v", err)
	}
	if _, err := r.ReadBlock(r.Series(0), -1, nil); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("block -1: %v", err)
	}
}

func TestWriterRejects(t *testing.T) {
	fs := newMemFS()
	w, err := Create("/db/r.seg", WriterOptions{FS: fs, BlockSamples: 2})
	if err != nil {
		t.Fatal(err)
	}
	f := func(t int64, v float64) point.Sample { return point.Sample{Time: t, Value: point.Float(v)} }
	ok := func(key string, kind point.Kind, s ...point.Sample) {
		t.Helper()
		if err := w.Add([]byte(key), kind, s); err != nil {
			t.Fatalf("Add(%q): %v", key, err)
		}
	}
	bad := func(what, key string, kind point.Kind, s ...point.Sample) {
		t.Helper()
		if err := w.Add([]byte(key), kind, s); !errors.Is(err, base.ErrInvalid) {
			t.Fatalf("%s: err = %v, want ErrInvalid", what, err)
		}
	}
	ok("m b", point.KindFloat, f(10, 1), f(20, 2), f(30, 3))
	bad("key before the last", "m a", point.KindFloat, f(1, 1))
	bad("kind change on the same key", "m b", point.KindInt, point.Sample{Time: 40, Value: point.Int(1)})
	bad("sample of another kind", "m c", point.KindFloat, f(1, 1), point.Sample{Time: 2, Value: point.Int(1)})
	bad("zero value", "m c", point.KindFloat, point.Sample{Time: 1})
	bad("time going back in a call", "m c", point.KindFloat, f(5, 1), f(4, 1))
	bad("repeated time in a call", "m c", point.KindFloat, f(5, 1), f(5, 1))
	bad("time not after the previous call", "m b", point.KindFloat, f(30, 1))
	bad("time before the previous call", "m b", point.KindFloat, f(25, 1))
	bad("invalid kind", "m c", point.KindInvalid, point.Sample{Time: 1})
	bad("kind out of range", "m c", point.Kind(9), point.Sample{Time: 1})
	bad("empty key", "", point.KindFloat, f(1, 1))
	ok("m b", point.KindFloat, f(31, 4)) // the rejected calls changed nothing
	ok("m c", point.KindFloat)           // no samples: nothing recorded
	ok("m d", point.KindFloat, f(1, 5))
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := w.Add([]byte("m e"), point.KindFloat, []point.Sample{f(1, 1)}); !errors.Is(err, base.ErrClosed) {
		t.Fatalf("Add after Finish: %v", err)
	}
	if _, err := w.Finish(); !errors.Is(err, base.ErrClosed) {
		t.Fatalf("second Finish: %v", err)
	}
	r, err := Open(fs, "/db/r.seg")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := readAll(r)
	if err != nil {
		t.Fatal(err)
	}
	want := []testSeries{
		{key: []byte("m b"), kind: point.KindFloat, samples: []point.Sample{f(10, 1), f(20, 2), f(30, 3), f(31, 4)}},
		{key: []byte("m d"), kind: point.KindFloat, samples: []point.Sample{f(1, 5)}},
	}
	if d := diffSeries(want, got); d != "" {
		t.Fatal(d)
	}

	for _, bs := range []int{-1, MaxBlockSamples + 1} {
		if _, err := Create("/db/x.seg", WriterOptions{FS: fs, BlockSamples: bs}); !errors.Is(err, base.ErrInvalid) {
			t.Fatalf("block size %d: %v", bs, err)
		}
	}
}

func TestWriterAddCopies(t *testing.T) {
	fs := newMemFS()
	w, err := Create("/db/c.seg", WriterOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("m f")
	samples := []point.Sample{{Time: 1, Value: point.Int(1)}, {Time: 2, Value: point.Int(2)}}
	if err := w.Add(key, point.KindInt, samples); err != nil {
		t.Fatal(err)
	}
	key[0] = 'z'
	samples[0] = point.Sample{Time: 100, Value: point.Int(100)}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(fs, "/db/c.seg")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, _ := readAll(r)
	want := []testSeries{{key: []byte("m f"), kind: point.KindInt, samples: []point.Sample{{Time: 1, Value: point.Int(1)}, {Time: 2, Value: point.Int(2)}}}}
	if d := diffSeries(want, got); d != "" {
		t.Fatal(d)
	}
}

func TestWriterSize(t *testing.T) {
	fs := newMemFS()
	w, err := Create("/db/s.seg", WriterOptions{FS: fs, BlockSamples: 100})
	if err != nil {
		t.Fatal(err)
	}
	if w.Size() != headerLen {
		t.Fatalf("empty writer: Size %d", w.Size())
	}
	prev := w.Size()
	for _, s := range iotDataset(30, 250) {
		if err := w.Add(s.key, s.kind, s.samples); err != nil {
			t.Fatal(err)
		}
		// 250 samples make two full blocks of 100 at least.
		if w.Size() < prev+150 {
			t.Fatalf("Size went from %d to %d", prev, w.Size())
		}
		prev = w.Size()
	}
	meta, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if meta.Size <= headerLen || w.Size() != meta.Size || int64(len(fs.bytes(t, "/db/s.seg"))) != meta.Size {
		t.Fatalf("Size %d, meta %d, last %d", w.Size(), meta.Size, prev)
	}
}

func TestEmptySegment(t *testing.T) {
	fs := newMemFS()
	meta := writeSegment(t, fs, "/db/e.seg", 0, nil)
	r, err := Open(fs, "/db/e.seg")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.NumSeries() != 0 || meta.Series != 0 || meta.Samples != 0 || r.Meta().Size != meta.Size {
		t.Fatalf("meta %+v / %+v", meta, r.Meta())
	}
	if _, ok := r.Find([]byte("m f")); ok {
		t.Fatal("found a key in an empty segment")
	}
}

func TestWriterPublishesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "000001.seg")
	w, err := Create(path, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	series := iotDataset(3, 50)
	for _, s := range series {
		if err := w.Add(s.key, s.kind, s.samples); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path + ".tmp"); err != nil {
		t.Fatalf("temporary file: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("final file exists before Finish: %v", err)
	}
	meta, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file after Finish: %v", err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() != meta.Size {
		t.Fatalf("final file: %v, size %v want %d", err, st, meta.Size)
	}
	if err := w.Abort(); err != nil {
		t.Fatalf("Abort after Finish: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("Abort after Finish removed the segment: %v", err)
	}
	openAndCheck(t, nil, path, series)

	// Abort removes the temporary file and publishes nothing.
	path2 := filepath.Join(dir, "000002.seg")
	w, err = Create(path2, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(series[0].key, series[0].kind, series[0].samples); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	names, _ := vfs.Default.ReadDir(dir)
	if !slices.Equal(names, []string{"000001.seg"}) {
		t.Fatalf("files after Abort: %v", names)
	}
}

func TestWriterIOErrors(t *testing.T) {
	series := iotDataset(20, 300)
	for _, op := range []vfs.Op{vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpClose, vfs.OpRename, vfs.OpSyncDir} {
		t.Run(op.String(), func(t *testing.T) {
			mem := newMemFS()
			fs := vfs.Inject(mem, func(o vfs.Op, _ string) error {
				if o == op {
					return vfs.ErrInjected
				}
				return nil
			})
			w, err := Create("/db/f.seg", WriterOptions{FS: fs})
			if err == nil {
				for _, s := range series {
					if err = w.Add(s.key, s.kind, s.samples); err != nil {
						break
					}
				}
				if err == nil {
					_, err = w.Finish()
				} else {
					w.Abort()
				}
			}
			if !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("err = %v, want the injected error", err)
			}
			if names, _ := mem.ReadDir("/db"); len(names) != 0 {
				t.Fatalf("files left after a failed write: %v", names)
			}
		})
	}
}

func TestConcurrentReaders(t *testing.T) {
	series := iotDataset(40, 300)
	fs := newMemFS()
	writeSegment(t, fs, "/db/c.seg", 64, series)
	r, err := Open(fs, "/db/c.seg")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range series {
				s := series[(i+g*5)%len(series)]
				idx, ok := r.Find(s.key)
				if !ok {
					errs <- fmt.Errorf("find %q", s.key)
					return
				}
				lo, hi := s.samples[g*10].Time, s.samples[len(s.samples)-g*10-1].Time
				it := r.iter(idx, lo, hi)
				n := 0
				for it.Next() {
					if want := s.samples[g*10+n]; it.At() != want {
						errs <- fmt.Errorf("%q sample %d: %v, want %v", s.key, n, it.At(), want)
						return
					}
					n++
				}
				if err := it.Close(); err != nil {
					errs <- err
					return
				}
				if n != len(s.samples)-g*20 {
					errs <- fmt.Errorf("%q: %d samples", s.key, n)
					return
				}
				if _, err := r.ReadBlock(idx, g%len(idx.Blocks), nil); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestFindAnyOrder checks Find in increasing, decreasing and random key
// order, with absent keys between, from several goroutines: its hint must
// never change an answer.
func TestFindAnyOrder(t *testing.T) {
	const n = 2000
	series := make([]testSeries, n)
	for i := range series {
		key := point.AppendSeriesKey(nil, "m", []point.Tag{{Key: "id", Value: fmt.Sprintf("%06d", 2*i)}}, "v")
		series[i] = testSeries{key: key, kind: point.KindInt, samples: []point.Sample{{Time: int64(i), Value: point.Int(int64(i))}}}
	}
	r := roundTrip(t, 0, series)
	check := func(i int) error {
		if i%2 == 1 {
			key := point.AppendSeriesKey(nil, "m", []point.Tag{{Key: "id", Value: fmt.Sprintf("%06d", i)}}, "v")
			if _, ok := r.Find(key); ok {
				return fmt.Errorf("found absent %q", key)
			}
			return nil
		}
		s := series[i/2]
		got, ok := r.Find(s.key)
		if !ok || !bytes.Equal(got.Key, s.key) || got.Blocks[0].MinTime != int64(i/2) {
			return fmt.Errorf("Find(%q) = %v, %v", s.key, got, ok)
		}
		return nil
	}
	orders := [][]int{make([]int, 2*n), make([]int, 2*n), rand.New(rand.NewPCG(3, 3)).Perm(2 * n)}
	for i := range 2 * n {
		orders[0][i], orders[1][i] = i, 2*n-1-i
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3*len(orders))
	for range 3 {
		for _, order := range orders {
			wg.Go(func() {
				for _, i := range order {
					if err := check(i); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestBlockReaderInline reads every block of a segment holding inline and
// stored blocks through BlockReaders of small and large windows, in key
// order, and requires exactly what Reader.ReadBlock returns.
func TestBlockReaderInline(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 3))
	kinds := []point.Kind{point.KindFloat, point.KindInt, point.KindUint, point.KindString, point.KindBool}
	series := make([]testSeries, 400)
	for i := range series {
		key := point.AppendSeriesKey(nil, "m", []point.Tag{{Key: "id", Value: fmt.Sprintf("%04d", i)}}, "v")
		n := 1 + rng.IntN(3) // short: kept inline
		if i%10 == 0 {
			n = 300 + rng.IntN(300) // long: stored blocks
		}
		kind := kinds[i%len(kinds)]
		series[i] = testSeries{key: key, kind: kind, samples: randomSamples(rng, kind, n)}
	}
	r := roundTrip(t, 128, series)
	var inline, stored int
	for _, window := range []int{64, 4 << 10, 1 << 20} {
		br := r.NewBlockReader(window)
		for i := range r.NumSeries() {
			s := r.Series(i)
			for b := range s.Blocks {
				if window == 64 {
					if s.Blocks[b].Inline() {
						inline++
					} else {
						stored++
					}
				}
				want, err := r.ReadBlock(s, b, nil)
				if err != nil {
					t.Fatal(err)
				}
				got, err := br.ReadBlock(s, b, nil)
				if err != nil {
					t.Fatalf("window %d, %q block %d: %v", window, s.Key, b, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("window %d, %q block %d: %v, want %v", window, s.Key, b, got, want)
				}
			}
		}
	}
	if inline == 0 || stored == 0 {
		t.Fatalf("%d inline and %d stored blocks; want both", inline, stored)
	}
}

// TestCopyBlock copies stored blocks between segments around samples
// added normally, and checks the errors that leave the writer as it was.
func TestCopyBlock(t *testing.T) {
	fs := newMemFS()
	rng := rand.New(rand.NewPCG(5, 5))
	src := randomSamples(rng, point.KindFloat, 40)
	w, err := Create("/db/src.seg", WriterOptions{FS: fs, BlockSamples: 10, InlineBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add([]byte("m f"), point.KindFloat, src); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(fs, "/db/src.seg")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	si := r.Series(0)

	// Output: "a f" by Add, then "m f" as 3 samples added, block 1 copied
	// (a block of the 3 is cut first), block 2 copied, 5 samples added.
	w, err = Create("/db/out.seg", WriterOptions{FS: fs, BlockSamples: 10})
	if err != nil {
		t.Fatal(err)
	}
	other := []point.Sample{{Time: 1, Value: point.Float(1)}}
	if err := w.Add([]byte("a f"), point.KindFloat, other); err != nil {
		t.Fatal(err)
	}
	if err := w.CopyBlock([]byte("m f"), point.KindInt, r, si, 1); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("copy with the wrong kind: %v", err)
	}
	if err := w.Add([]byte("m f"), point.KindFloat, src[:3]); err != nil {
		t.Fatal(err)
	}
	for _, b := range []int{1, 2} {
		if err := w.CopyBlock([]byte("m f"), point.KindFloat, r, si, b); err != nil {
			t.Fatalf("copy block %d: %v", b, err)
		}
	}
	if err := w.CopyBlock([]byte("m f"), point.KindFloat, r, si, 0); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("copy of an older block: %v", err)
	}
	if err := w.Add([]byte("m f"), point.KindFloat, src[30:35]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	want := []testSeries{
		{key: []byte("a f"), kind: point.KindFloat, samples: other},
		{key: []byte("m f"), kind: point.KindFloat, samples: slices.Concat(src[:3], src[10:35])},
	}
	out := openAndCheck(t, fs, "/db/out.seg", want)
	// Blocks: the 3 added, the two copied (their stats kept), the 5 added.
	if got := out.Series(1); len(got.Blocks) != 4 || got.Blocks[1].Count != 10 || got.Blocks[1].Partial == nil || !bytes.Equal(got.Blocks[1].Partial, si.Blocks[1].Partial) || got.Blocks[2].Length != si.Blocks[2].Length {
		t.Fatalf("blocks %+v", got.Blocks)
	}

	// A damaged source block is a corruption error, and nothing is written.
	data := fs.bytes(t, "/db/src.seg")
	data[si.Blocks[3].Offset+3] ^= 0xff
	fs.put("/db/bad.seg", data)
	bad, err := Open(fs, "/db/bad.seg")
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	w, err = Create("/db/out2.seg", WriterOptions{FS: fs, BlockSamples: 10})
	if err != nil {
		t.Fatal(err)
	}
	var ce *base.CorruptionError
	if err := w.CopyBlock([]byte("m f"), point.KindFloat, bad, bad.Series(0), 3); !errors.As(err, &ce) || ce.Path != "/db/bad.seg" {
		t.Fatalf("copy of a damaged block: %v", err)
	}
	if err := w.Add([]byte("m f"), point.KindFloat, src[:2]); err != nil {
		t.Fatalf("writer unusable after a failed copy: %v", err)
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	openAndCheck(t, fs, "/db/out2.seg", []testSeries{{key: []byte("m f"), kind: point.KindFloat, samples: src[:2]}})
}

// repetitiveSeries returns n series whose keys differ only at the end of
// 4 KiB: they compress past the ratio a reader accepts (maxRatio), so an
// index of them must be stored raw.
func repetitiveSeries(n int) []testSeries {
	out := make([]testSeries, n)
	for i := range out {
		key := fmt.Appendf(bytes.Repeat([]byte("a"), 4<<10), "%06d", i)
		out[i] = testSeries{key: key, kind: point.KindUint, samples: []point.Sample{{Time: 1, Value: point.Uint(7)}}}
	}
	return out
}

// writeStreamed creates name with opts and adds series, whose index must
// be large enough for the Writer to stream it; it returns the Writer
// before Finish.
func writeStreamed(t *testing.T, name string, opts WriterOptions, series []testSeries) *Writer {
	t.Helper()
	w, err := Create(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range series {
		if err := w.Add(s.key, s.kind, s.samples); err != nil {
			t.Fatal(err)
		}
	}
	if w.zindex == nil {
		t.Fatalf("%s: the index was not streamed", name)
	}
	return w
}

// TestStreamedIndex writes indexes past the point where the Writer starts
// compressing them as a stream: compressible ones (sent as the count's
// frame and the entries' frame) and ones that compress too well for a
// reader to accept (recovered from the stream and stored raw). Each must read back exactly, by position and
// by key, as the same series written with the index compressed whole.
func TestStreamedIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, tc := range []struct {
		name       string
		series     []testSeries
		compressed bool
	}{
		{"compressible", randomSeries(rng, 2000, 30), true},
		{"too compressible", repetitiveSeries(2000), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newMemFS()
			whole := writeSegment(t, fs, "whole.seg", 8, tc.series)
			defer func(at int) { indexStreamAt = at }(indexStreamAt)
			indexStreamAt = 4 << 10
			w := writeStreamed(t, "streamed.seg", WriterOptions{FS: fs, BlockSamples: 8}, tc.series)
			streamed, err := w.Finish()
			if err != nil {
				t.Fatal(err)
			}
			if whole.Series != streamed.Series || whole.Samples != streamed.Samples {
				t.Fatalf("metas differ: %+v vs %+v", whole, streamed)
			}
			data := fs.bytes(t, "streamed.seg")
			ft, err := parseFooter(data[len(data)-footerLen:], formatVersion)
			if err != nil {
				t.Fatal(err)
			}
			if got := data[ft.indexOff]&flagZstd != 0; got != tc.compressed {
				t.Fatalf("index compressed = %v, want %v", got, tc.compressed)
			}
			a := openAndCheck(t, fs, "whole.seg", tc.series)
			b := openAndCheck(t, fs, "streamed.seg", tc.series)
			for i, s := range tc.series {
				got, ok := b.Find(s.key)
				if !ok || !reflect.DeepEqual(got, a.Series(i)) || !reflect.DeepEqual(got, b.Series(i)) {
					t.Fatalf("series %d (%q): %+v, %v, want %+v", i, s.key, got, ok, a.Series(i))
				}
			}
		})
	}
}
