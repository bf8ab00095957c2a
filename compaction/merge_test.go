package compaction

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/testutil"
	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/segment"
)

func TestMergeLastWriteWins(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.Default
	// Three inputs, oldest first; each has a distinct value offset so the
	// winner of every timestamp is visible.
	in0 := writeSeg(t, fs, filepath.Join(dir, "0.seg"), 4, []tseries{
		{key: "m a", kind: point.KindFloat, samples: floats(0, span(0, 20, 2)...)},
		{key: "m b", kind: point.KindFloat, samples: floats(0, 1, 2, 3)},
	})
	in1 := writeSeg(t, fs, filepath.Join(dir, "1.seg"), 3, []tseries{
		{key: "m a", kind: point.KindFloat, samples: floats(1000, span(10, 30, 5)...)},
		{key: "m c", kind: point.KindFloat, samples: floats(1000, 7)},
	})
	in2 := writeSeg(t, fs, filepath.Join(dir, "2.seg"), 2, []tseries{
		{key: "m a", kind: point.KindFloat, samples: floats(2000, 0, 20, 30, 40)},
		{key: "m b", kind: point.KindFloat, samples: floats(2000, 3)},
	})
	o := &outputs{fs: fs, dir: dir, blockSamples: 3}
	metas, st, err := Merge(context.Background(), []Input{{Reader: in0}, {Reader: in1}, {Reader: in2}}, o.mergeOpts())
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) != 1 {
		t.Fatalf("got %d outputs, want 1", len(metas))
	}
	want := model{
		// in0: 0 2 4 ... 20; in1: 10 15 20 25 30; in2: 0 20 30 40.
		"m a": {
			{Time: 0, Value: point.Float(2000)}, {Time: 2, Value: point.Float(2)}, {Time: 4, Value: point.Float(4)},
			{Time: 6, Value: point.Float(6)}, {Time: 8, Value: point.Float(8)}, {Time: 10, Value: point.Float(1010)},
			{Time: 12, Value: point.Float(12)}, {Time: 14, Value: point.Float(14)}, {Time: 15, Value: point.Float(1015)},
			{Time: 16, Value: point.Float(16)}, {Time: 18, Value: point.Float(18)}, {Time: 20, Value: point.Float(2020)},
			{Time: 25, Value: point.Float(1025)}, {Time: 30, Value: point.Float(2030)}, {Time: 40, Value: point.Float(2040)},
		},
		"m b": {{Time: 1, Value: point.Float(1)}, {Time: 2, Value: point.Float(2)}, {Time: 3, Value: point.Float(2003)}},
		"m c": {{Time: 7, Value: point.Float(1007)}},
	}
	checkModel(t, readOutputs(t, fs, metas, nil), want)
	// "m a": 11 + 5 + 4 in, 15 out; "m b": 3 + 1 in, 3 out; "m c": 1.
	if st.SamplesIn != 25 || st.SamplesOut != 19 || st.SamplesOverwritten != 6 || st.SamplesDropped != 0 {
		t.Errorf("stats %+v: want in 25, out 19, overwritten 6, dropped 0", st)
	}
	if st.SeriesIn != 3 || st.SeriesOut != 3 {
		t.Errorf("series in/out = %d/%d, want 3/3", st.SeriesIn, st.SeriesOut)
	}
	if st.BytesWritten != metas[0].Size || st.BytesRead <= 0 {
		t.Errorf("bytes read %d written %d, output size %d", st.BytesRead, st.BytesWritten, metas[0].Size)
	}
	if metas[0].Samples != 19 || metas[0].Series != 3 || metas[0].MinTime != 0 || metas[0].MaxTime != 40 {
		t.Errorf("output meta %+v", metas[0])
	}
}

func TestMergeOrderDecidesNotFileName(t *testing.T) {
	// The same two segments in the opposite order: the other one wins.
	dir := t.TempDir()
	fs := vfs.Default
	a := writeSeg(t, fs, filepath.Join(dir, "a.seg"), 10, []tseries{{key: "k", kind: point.KindInt, samples: []point.Sample{{Time: 5, Value: point.Int(1)}}}})
	b := writeSeg(t, fs, filepath.Join(dir, "b.seg"), 10, []tseries{{key: "k", kind: point.KindInt, samples: []point.Sample{{Time: 5, Value: point.Int(2)}}}})
	for _, tc := range []struct {
		in   []Input
		want int64
	}{{[]Input{{Reader: a}, {Reader: b}}, 2}, {[]Input{{Reader: b}, {Reader: a}}, 1}} {
		o := &outputs{fs: fs, dir: t.TempDir(), blockSamples: 10}
		metas, _, err := Merge(context.Background(), tc.in, o.mergeOpts())
		if err != nil {
			t.Fatal(err)
		}
		checkModel(t, readOutputs(t, fs, metas, nil), model{"k": {{Time: 5, Value: point.Int(tc.want)}}})
	}
}

func TestMergeManyAddsAcrossBlocks(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.Default
	// One long series written with many Adds of odd sizes into blocks of 7,
	// interleaved in time with a second input's blocks of 5.
	var even, odd []int64
	for i := range int64(200) {
		if i%2 == 0 {
			even = append(even, i)
		} else {
			odd = append(odd, i)
		}
	}
	in0 := writeSeg(t, fs, filepath.Join(dir, "0.seg"), 7, []tseries{
		{key: "cpu,host=a usage", kind: point.KindFloat, samples: floats(0, even...), chunks: []int{1, 3, 13, 2, 40, 1, 9}},
	})
	in1 := writeSeg(t, fs, filepath.Join(dir, "1.seg"), 5, []tseries{
		{key: "cpu,host=a usage", kind: point.KindFloat, samples: floats(0.5, odd...), chunks: []int{11, 11, 11}},
	})
	if n := len(in0.Series(0).Blocks); n < 10 {
		t.Fatalf("input 0 has %d blocks, want many", n)
	}
	o := &outputs{fs: fs, dir: dir, blockSamples: 6}
	metas, st, err := Merge(context.Background(), []Input{{Reader: in0}, {Reader: in1}}, o.mergeOpts())
	if err != nil {
		t.Fatal(err)
	}
	want := model{"cpu,host=a usage": append(floats(0, even...), floats(0.5, odd...)...)}
	slices.SortFunc(want["cpu,host=a usage"], func(a, b point.Sample) int { return int(a.Time - b.Time) })
	checkModel(t, readOutputs(t, fs, metas, nil), want)
	wantBlocks := int64(len(in0.Series(0).Blocks) + len(in1.Series(0).Blocks))
	if st.BlocksRead != wantBlocks {
		t.Errorf("read %d blocks, want each of the %d input blocks once", st.BlocksRead, wantBlocks)
	}
	// Every output block but the last is full: the merge re-chunks.
	r, err := segment.Open(fs, metas[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	blocks := r.Series(0).Blocks
	for i, b := range blocks[:len(blocks)-1] {
		if b.Count != 6 {
			t.Errorf("output block %d has %d samples, want 6", i, b.Count)
		}
	}
}

func TestMergeDropAndMinTime(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.Default
	old := writeSeg(t, fs, filepath.Join(dir, "old.seg"), 4, []tseries{
		{key: "a", kind: point.KindInt, samples: intsAt(0, span(0, 19, 1)...)},
		{key: "b", kind: point.KindInt, samples: intsAt(0, span(0, 9, 1)...)},
	})
	young := writeSeg(t, fs, filepath.Join(dir, "young.seg"), 4, []tseries{
		{key: "a", kind: point.KindInt, samples: intsAt(100, 5, 6, 7, 25)},
	})
	f := func(name string, minTime int64, dropOld, dropYoung map[string][]TimeRange, want model) {
		t.Helper()
		t.Run(name, func(t *testing.T) {
			calls := map[string]int{}
			dropper := func(tag string, m map[string][]TimeRange) func([]byte) []TimeRange {
				if m == nil {
					return nil
				}
				return func(key []byte) []TimeRange {
					calls[tag+"/"+string(key)]++
					return m[string(key)]
				}
			}
			o := &outputs{fs: fs, dir: t.TempDir(), blockSamples: 3}
			opts := o.mergeOpts()
			opts.MinTime = minTime
			metas, st, err := Merge(context.Background(), []Input{
				{Reader: old, Drop: dropper("old", dropOld)},
				{Reader: young, Drop: dropper("young", dropYoung)},
			}, opts)
			if err != nil {
				t.Fatal(err)
			}
			checkModel(t, readOutputs(t, fs, metas, nil), want)
			for k, n := range calls {
				if n != 1 {
					t.Errorf("Drop for %s called %d times, want once", k, n)
				}
			}
			if st.SamplesIn != 34 || st.SamplesIn != st.SamplesOut+st.SamplesDropped+st.SamplesOverwritten {
				t.Errorf("stats don't add up: %+v", st)
			}
		})
	}
	aOld := func(times ...int64) []point.Sample { return intsAt(0, times...) }
	aYoung := func(times ...int64) []point.Sample { return intsAt(100, times...) }
	cat := func(parts ...[]point.Sample) []point.Sample {
		var out []point.Sample
		for _, p := range parts {
			out = append(out, p...)
		}
		slices.SortFunc(out, func(a, b point.Sample) int { return int(a.Time - b.Time) })
		return out
	}
	f("nothing dropped", math.MinInt64, nil, nil, model{
		"a": cat(aOld(span(0, 4, 1)...), aYoung(5, 6, 7), aOld(span(8, 19, 1)...), aYoung(25)),
		"b": aOld(span(0, 9, 1)...),
	})
	f("retention", 7, nil, nil, model{
		"a": cat(aYoung(7), aOld(span(8, 19, 1)...), aYoung(25)),
		"b": aOld(7, 8, 9),
	})
	f("retention at zero keeps zero", 0, nil, nil, model{
		"a": cat(aOld(span(0, 4, 1)...), aYoung(5, 6, 7), aOld(span(8, 19, 1)...), aYoung(25)),
		"b": aOld(span(0, 9, 1)...),
	})
	// A tombstone newer than old but older than young: old's samples in
	// range go, young's stay.
	f("drop old only", math.MinInt64, map[string][]TimeRange{"a": {{3, 12}}}, nil, model{
		"a": cat(aOld(0, 1, 2), aYoung(5, 6, 7), aOld(span(13, 19, 1)...), aYoung(25)),
		"b": aOld(span(0, 9, 1)...),
	})
	// Dropping the young sample uncovers the old one at the same time.
	f("drop young uncovers old", math.MinInt64, nil, map[string][]TimeRange{"a": {{6, 6}}}, model{
		"a": cat(aOld(span(0, 4, 1)...), aYoung(5), aOld(6), aYoung(7), aOld(span(8, 19, 1)...), aYoung(25)),
		"b": aOld(span(0, 9, 1)...),
	})
	// Unsorted, overlapping, adjacent and empty ranges.
	f("messy ranges", math.MinInt64, map[string][]TimeRange{
		"a": {{15, 16}, {1, 2}, {2, 3}, {17, 17}, {9, 8}, {4, 4}},
		"b": {{math.MinInt64, 3}, {8, math.MaxInt64}},
	}, nil, model{
		"a": cat(aOld(0), aYoung(5, 6, 7), aOld(span(8, 14, 1)...), aOld(18, 19), aYoung(25)),
		"b": aOld(4, 5, 6, 7),
	})
	f("retention and drop", 10, map[string][]TimeRange{"a": {{12, 30}}}, map[string][]TimeRange{"a": {{20, 30}}}, model{
		"a": aOld(10, 11), // "b" lies wholly before the cutoff: not written
	})
}

// intsAt builds int samples with value = time + add.
func intsAt(add int64, times ...int64) []point.Sample {
	out := make([]point.Sample, len(times))
	for i, t := range times {
		out[i] = point.Sample{Time: t, Value: point.Int(t + add)}
	}
	return out
}

func TestMergeSeriesDroppedEntirely(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.Default
	in := writeSeg(t, fs, filepath.Join(dir, "in.seg"), 10, []tseries{
		{key: "a", kind: point.KindBool, samples: boolsAt(span(0, 99, 1)...)},
		{key: "b", kind: point.KindBool, samples: boolsAt(span(50, 149, 1)...)},
		{key: "c", kind: point.KindBool, samples: boolsAt(span(0, 49, 1)...)},
	})
	drop := func(key []byte) []TimeRange {
		if string(key) == "b" {
			return []TimeRange{{Min: 0, Max: 1000}}
		}
		return nil
	}
	o := &outputs{fs: fs, dir: t.TempDir(), blockSamples: 10}
	opts := o.mergeOpts()
	opts.MinTime = 50 // all of "c" is older
	metas, st, err := Merge(context.Background(), []Input{{Reader: in, Drop: drop}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkModel(t, readOutputs(t, fs, metas, nil), model{"a": boolsAt(span(50, 99, 1)...)})
	if st.SeriesIn != 3 || st.SeriesOut != 1 || st.SamplesOut != 50 || st.SamplesDropped != 200 {
		t.Errorf("stats %+v", st)
	}
	// b's 10 blocks, c's 5 and a's first 5 are dropped without reading.
	if st.BlocksSkipped != 20 || st.BlocksRead != 5 {
		t.Errorf("blocks skipped %d read %d, want 20 and 5", st.BlocksSkipped, st.BlocksRead)
	}

	// Everything dropped: no output at all, not even an empty file.
	o2 := &outputs{fs: fs, dir: t.TempDir(), blockSamples: 10}
	opts = o2.mergeOpts()
	opts.MinTime = 1000
	metas, st, err = Merge(context.Background(), []Input{{Reader: in}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) != 0 || o2.n.Load() != 0 || len(listDir(t, o2.dir)) != 0 {
		t.Errorf("got %d outputs, %d created, files %v; want none", len(metas), o2.n.Load(), listDir(t, o2.dir))
	}
	if st.BlocksRead != 0 || st.BytesRead != 0 || st.SamplesDropped != 250 {
		t.Errorf("stats %+v: want nothing read and 250 dropped", st)
	}

	// No inputs at all.
	metas, _, err = Merge(context.Background(), nil, o2.mergeOpts())
	if err != nil || len(metas) != 0 {
		t.Errorf("Merge(nil) = %v, %v", metas, err)
	}
}

func boolsAt(times ...int64) []point.Sample {
	out := make([]point.Sample, len(times))
	for i, t := range times {
		out[i] = point.Sample{Time: t, Value: point.Bool(t%3 == 0)}
	}
	return out
}

// manySeries returns n float series "s0000".. with count samples each.
func manySeries(n, count int) []tseries {
	out := make([]tseries, n)
	for i := range out {
		out[i] = tseries{key: fmt.Sprintf("s%04d", i), kind: point.KindFloat, samples: floats(float64(i), span(0, int64(count-1), 1)...)}
	}
	return out
}

func TestMergeCutsOutputsAtSeriesBoundaries(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.Default
	// Stored blocks only: a writer's Size counts inline blocks at their raw
	// size, which the compressed index of the finished file undercuts, so
	// outputs with inline blocks may end up a little below the target.
	stored := segment.WriterOptions{FS: fs, BlockSamples: 16, InlineBytes: -1}
	in0 := writeSegOpts(t, filepath.Join(dir, "0.seg"), stored, manySeries(60, 100))
	in1 := writeSegOpts(t, filepath.Join(dir, "1.seg"), stored, manySeries(45, 150)[5:])
	want := model{}
	for _, s := range manySeries(60, 100) {
		want[s.key] = s.samples
	}
	for _, s := range manySeries(45, 150)[5:] {
		want[s.key] = s.samples
	}
	total := in0.Meta().Size + in1.Meta().Size
	target := total / 8
	o := &outputs{fs: fs, dir: t.TempDir(), blockSamples: 16, inlineBytes: -1}
	opts := o.mergeOpts()
	opts.TargetSegmentBytes = target
	metas, st, err := Merge(context.Background(), []Input{{Reader: in0}, {Reader: in1}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) < 3 {
		t.Fatalf("got %d outputs for %d input bytes and target %d, want several", len(metas), total, target)
	}
	var sum int64
	for i, m := range metas {
		sum += m.Size
		if i < len(metas)-1 && m.Size < target {
			t.Errorf("output %d cut at %d bytes, before the target %d", i, m.Size, target)
		}
		if i > 0 && bytes.Compare(metas[i-1].LastKey, m.FirstKey) >= 0 {
			t.Errorf("outputs %d and %d overlap: %q >= %q", i-1, i, metas[i-1].LastKey, m.FirstKey)
		}
	}
	if sum != st.BytesWritten {
		t.Errorf("BytesWritten %d, outputs sum to %d", st.BytesWritten, sum)
	}
	// readOutputs checks keys strictly increase across outputs, so no series
	// is split between two of them.
	checkModel(t, readOutputs(t, fs, metas, nil), want)
}

func TestMergeCancel(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.Default
	in := writeSeg(t, fs, filepath.Join(dir, "in.seg"), 8, manySeries(600, 20))

	t.Run("before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		o := &outputs{fs: fs, dir: t.TempDir(), blockSamples: 8}
		metas, _, err := Merge(ctx, []Input{{Reader: in}}, o.mergeOpts())
		if !errors.Is(err, context.Canceled) || metas != nil {
			t.Fatalf("Merge = %v, %v; want context.Canceled", metas, err)
		}
		if o.n.Load() != 0 {
			t.Errorf("%d outputs created", o.n.Load())
		}
	})
	t.Run("midway", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		calls, atCancel := 0, 0
		drop := func([]byte) []TimeRange {
			calls++
			if calls == 300 {
				atCancel = calls
				cancel()
			}
			return nil
		}
		o := &outputs{fs: fs, dir: t.TempDir(), blockSamples: 8}
		opts := o.mergeOpts()
		opts.TargetSegmentBytes = in.Meta().Size / 20
		metas, _, err := Merge(ctx, []Input{{Reader: in, Drop: drop}}, opts)
		if !errors.Is(err, context.Canceled) || metas != nil {
			t.Fatalf("Merge = %v, %v; want context.Canceled", metas, err)
		}
		if o.n.Load() < 3 {
			t.Errorf("only %d outputs created before the cancel; the test wants finished ones to clean up", o.n.Load())
		}
		if late := calls - atCancel; late > checkContextEvery {
			t.Errorf("%d series merged after the cancel, want at most %d", late, checkContextEvery)
		}
		if names := listDir(t, o.dir); len(names) != 0 {
			t.Errorf("files left after cancel: %v", names)
		}
	})
}

func TestMergeKindConflict(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.Default
	a := writeSeg(t, fs, filepath.Join(dir, "a.seg"), 10, []tseries{
		{key: "a", kind: point.KindInt, samples: intsAt(0, 1, 2)},
		{key: "k", kind: point.KindInt, samples: intsAt(0, 1, 2)},
	})
	b := writeSeg(t, fs, filepath.Join(dir, "b.seg"), 10, []tseries{{key: "k", kind: point.KindFloat, samples: floats(0, 3)}})
	o := &outputs{fs: fs, dir: t.TempDir(), blockSamples: 10}
	_, _, err := Merge(context.Background(), []Input{{Reader: a}, {Reader: b}}, o.mergeOpts())
	if !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("Merge = %v, want ErrCorrupt", err)
	}
	if names := listDir(t, o.dir); len(names) != 0 {
		t.Errorf("files left: %v", names)
	}
}

func TestMergeInvalidOptions(t *testing.T) {
	if _, _, err := Merge(context.Background(), nil, MergeOptions{}); !errors.Is(err, base.ErrInvalid) {
		t.Errorf("nil NewOutput: %v, want ErrInvalid", err)
	}
	o := &outputs{fs: vfs.Default, dir: t.TempDir()}
	if _, _, err := Merge(context.Background(), []Input{{}}, o.mergeOpts()); !errors.Is(err, base.ErrInvalid) {
		t.Errorf("nil Reader: %v, want ErrInvalid", err)
	}
}

// TestMergeRandom merges random segments with random overlaps, deletes and
// retention and compares every output sample with a simple model.
func TestMergeRandom(t *testing.T) {
	kinds := []point.Kind{point.KindFloat, point.KindInt, point.KindUint, point.KindBool, point.KindString}
	kindOf := func(key string) point.Kind {
		var n int
		fmt.Sscanf(key, "m,k=%d", &n)
		return kinds[n%len(kinds)]
	}
	iters := 30
	if testing.Short() {
		iters = 10
	}
	for iter := range iters {
		rng := rand.New(rand.NewPCG(uint64(iter), 77))
		dir := t.TempDir()
		fs := vfs.Default
		nin := 1 + rng.IntN(5)
		nkeys := 1 + rng.IntN(30)
		minTime := int64(math.MinInt64)
		if rng.IntN(2) == 0 {
			minTime = rng.Int64N(120) - 60
		}
		want := mergeModel{}
		var inputs []Input
		var totalIn int64
		for i := range nin {
			var series []tseries
			drops := map[string][]TimeRange{}
			for k := range nkeys {
				if rng.IntN(3) == 0 {
					continue
				}
				key := fmt.Sprintf("m,k=%02d f", k)
				kind := kindOf(key)
				var samples []point.Sample
				tm := rng.Int64N(100) - 50
				if rng.IntN(20) == 0 {
					samples = append(samples, point.Sample{Time: math.MinInt64, Value: testutil.RandValue(rng, kind)})
				}
				for range rng.IntN(60) {
					samples = append(samples, point.Sample{Time: tm, Value: testutil.RandValue(rng, kind)})
					tm += 1 + rng.Int64N(4)
				}
				if rng.IntN(20) == 0 {
					samples = append(samples, point.Sample{Time: math.MaxInt64, Value: testutil.RandValue(rng, kind)})
				}
				if len(samples) == 0 {
					continue
				}
				var chunks []int
				for range rng.IntN(4) {
					chunks = append(chunks, 1+rng.IntN(10))
				}
				series = append(series, tseries{key: key, kind: kind, samples: samples, chunks: chunks})
				for range rng.IntN(3) {
					lo := rng.Int64N(200) - 80
					drops[key] = append(drops[key], TimeRange{Min: lo, Max: lo + rng.Int64N(30) - 3})
				}
				if rng.IntN(15) == 0 {
					drops[key] = append(drops[key], TimeRange{Min: math.MinInt64, Max: math.MaxInt64})
				}
				// The model: this input's kept samples overwrite older ones.
				want.add(key, samples, minTime, drops[key])
				totalIn += int64(len(samples))
			}
			if len(series) == 0 {
				continue
			}
			r := writeSeg(t, fs, filepath.Join(dir, fmt.Sprintf("in%d.seg", i)), 1+rng.IntN(8), series)
			inputs = append(inputs, Input{Reader: r, Drop: func(key []byte) []TimeRange { return slices.Clone(drops[string(key)]) }})
		}
		wantModel, out := want.final()
		bs := 1 + rng.IntN(9)
		o := &outputs{fs: fs, dir: t.TempDir(), blockSamples: bs}
		opts := o.mergeOpts()
		opts.MinTime = minTime
		if rng.IntN(2) == 0 {
			opts.TargetSegmentBytes = 1 + rng.Int64N(2000)
		}
		metas, st, err := Merge(context.Background(), inputs, opts)
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		checkModel(t, readOutputs(t, fs, metas, kindOf), wantModel)
		checkMergeStats(t, iter, st, totalIn, out, len(wantModel))
		if limit := int64(len(inputs)+1) * int64(max(8, bs)); st.MaxResidentSamples > limit {
			t.Errorf("iter %d: %d samples resident, bound %d", iter, st.MaxResidentSamples, limit)
		}
		if t.Failed() {
			t.Fatalf("iter %d failed (inputs %d, keys %d, minTime %d, block %d)", iter, len(inputs), nkeys, minTime, bs)
		}
	}
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestMergeMemoryBounded merges inputs far larger than a block and checks
// that Merge holds one block per input: by its own count of resident
// samples and by the live heap measured while it runs.
func TestMergeMemoryBounded(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.Default
	const (
		nseries    = 1
		perSeries  = 20000
		valueBytes = 256
		block      = 50
	)
	// Two inputs with interleaved times of the same long string series, so
	// every sample is live in the output and nothing compresses away. Each
	// input series holds 5 MB of strings.
	rng := rand.New(rand.NewPCG(1, 2))
	randString := func() string {
		b := make([]byte, valueBytes)
		for i := range b {
			b[i] = 'a' + byte(rng.IntN(26))
		}
		return string(b)
	}
	var inputs []Input
	for i := range 2 {
		series := make([]tseries, nseries)
		for s := range series {
			samples := make([]point.Sample, perSeries)
			for j := range samples {
				samples[j] = point.Sample{Time: int64(2*j + i), Value: point.String(randString())}
			}
			series[s] = tseries{key: fmt.Sprintf("big%d", s), kind: point.KindString, samples: samples}
		}
		r := writeSeg(t, fs, filepath.Join(dir, fmt.Sprintf("in%d.seg", i)), block, series)
		inputs = append(inputs, Input{Reader: r})
	}
	dataBytes := int64(2 * nseries * perSeries * valueBytes) // 10 MB of string payload

	var ms runtime.MemStats
	live := func() int64 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	base0 := live()
	var peak int64
	blocks := 0
	o := &outputs{fs: fs, dir: t.TempDir(), blockSamples: block}
	opts := o.mergeOpts()
	opts.onBlockRead = func() {
		blocks++
		if blocks%40 == 0 {
			peak = max(peak, live()-base0)
		}
	}
	metas, st, err := Merge(context.Background(), inputs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if st.SamplesOut != 2*nseries*perSeries || len(metas) != 1 {
		t.Fatalf("wrote %d samples in %d outputs", st.SamplesOut, len(metas))
	}
	if bound := int64(len(inputs)+1) * block; st.MaxResidentSamples > bound {
		t.Errorf("%d samples resident, want at most %d (one block per input plus the output block)", st.MaxResidentSamples, bound)
	}
	t.Logf("data %d B, peak live heap growth %d B over %d blocks", dataBytes, peak, blocks)
	// The writer's 1 MiB output buffer and zstd state account for most of
	// the growth; holding the series of both inputs would add 10 MB.
	if peak > dataBytes/3 {
		t.Errorf("live heap grew by %d B while merging %d B of samples: memory is not bounded by blocks", peak, dataBytes)
	}
}

// TestMergeInjectedErrors fails each output operation in turn, and input
// reads, and checks that Merge returns the error and leaves no output file.
func TestMergeInjectedErrors(t *testing.T) {
	dir := t.TempDir()
	// Stored blocks, so that merging reads the input files.
	stored := segment.WriterOptions{FS: vfs.Default, BlockSamples: 8, InlineBytes: -1}
	in0 := writeSegOpts(t, filepath.Join(dir, "0.seg"), stored, manySeries(40, 30))
	in1 := writeSegOpts(t, filepath.Join(dir, "1.seg"), stored, manySeries(30, 45))
	inputs := []Input{{Reader: in0}, {Reader: in1}}
	target := (in0.Meta().Size + in1.Meta().Size) / 6

	// run merges into a fresh directory; last is the name of the last
	// output created.
	run := func(t *testing.T, inj vfs.Injector) (metas []segment.Meta, outDir, last string, err error) {
		t.Helper()
		outDir = t.TempDir()
		o := &outputs{fs: vfs.Inject(vfs.Default, inj), dir: outDir, blockSamples: 8}
		opts := o.mergeOpts()
		opts.TargetSegmentBytes = target
		metas, _, err = Merge(context.Background(), inputs, opts)
		return metas, outDir, fmt.Sprintf("out-%06d.seg", o.n.Load()), err
	}
	for _, op := range []vfs.Op{vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpClose, vfs.OpRename, vfs.OpSyncDir} {
		for _, short := range []bool{false, true} {
			if short && op != vfs.OpWrite {
				continue
			}
			name := op.String()
			if short {
				name = "short-write"
			}
			t.Run(name, func(t *testing.T) {
				failures := 0
				// Fail every early operation, then a sparser sample of later ones.
				for n := int64(0); ; n += 1 + n/4 {
					oi := &vfs.OnIndex{N: n, Match: func(o vfs.Op, _ string) bool { return o == op }}
					inj := oi.Injector()
					if short {
						inj = func(o vfs.Op, name string) error {
							if err := oi.Injector()(o, name); err != nil {
								return vfs.ShortWrite{Err: err}
							}
							return nil
						}
					}
					metas, outDir, last, err := run(t, inj)
					if err == nil {
						if oi.Count() > n {
							t.Fatalf("failure of %s #%d was swallowed", op, n)
						}
						if len(metas) < 2 {
							t.Fatalf("clean run wrote %d outputs, want several", len(metas))
						}
						break
					}
					failures++
					if !errors.Is(err, vfs.ErrInjected) {
						t.Errorf("%s #%d: error %v does not wrap the injected one", op, n, err)
					}
					names := listDir(t, outDir)
					if op == vfs.OpSyncDir && slices.Equal(names, []string{last}) {
						// segment.Writer.Finish fails after publishing the
						// file when the directory sync fails, and a Writer
						// does not tell Merge its path. The engine removes
						// such orphans on open; Merge removes every earlier
						// output.
						names = nil
					}
					if len(names) != 0 {
						t.Fatalf("%s #%d failed: files left behind: %v", op, n, names)
					}
				}
				if failures == 0 {
					t.Fatalf("no %s operation was ever failed", op)
				}
			})
		}
	}

	t.Run("input-read", func(t *testing.T) {
		var armed atomic.Bool
		for n := int64(0); ; n += 1 + n/4 {
			oi := &vfs.OnIndex{N: n, Match: func(o vfs.Op, _ string) bool { return armed.Load() && o == vfs.OpRead }}
			fs := vfs.Inject(vfs.Default, oi.Injector())
			armed.Store(false)
			r0, err := segment.Open(fs, in0.Meta().Path)
			if err != nil {
				t.Fatal(err)
			}
			r1, err := segment.Open(fs, in1.Meta().Path)
			if err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			o := &outputs{fs: vfs.Default, dir: t.TempDir(), blockSamples: 8}
			opts := o.mergeOpts()
			opts.TargetSegmentBytes = target
			_, _, err = Merge(context.Background(), []Input{{Reader: r0}, {Reader: r1}}, opts)
			r0.Close()
			r1.Close()
			if err == nil {
				if oi.Count() > n {
					t.Fatalf("read failure #%d swallowed", n)
				}
				if n == 0 {
					t.Fatal("merge read nothing")
				}
				return
			}
			if !errors.Is(err, vfs.ErrInjected) {
				t.Errorf("read #%d: %v does not wrap the injected error", n, err)
			}
			if names := listDir(t, o.dir); len(names) != 0 {
				t.Fatalf("read #%d failed: files left behind: %v", n, names)
			}
		}
	})
}

// TestMergeCleansUpThroughItsFS fails a merge after it has finished an
// output: the output is removed from the filesystem it was written on, and
// a file of the same name on another filesystem is left alone. A nil FS is
// refused rather than defaulted.
func TestMergeCleansUpThroughItsFS(t *testing.T) {
	dir := t.TempDir()
	mem := vfs.NewMem()
	if err := mem.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	a := writeSeg(t, mem, filepath.Join(dir, "a.seg"), 10, []tseries{
		{key: "a", kind: point.KindInt, samples: intsAt(0, 1, 2)},
		{key: "b", kind: point.KindInt, samples: intsAt(0, 1, 2)},
		{key: "k", kind: point.KindInt, samples: intsAt(0, 1, 2)},
	})
	b := writeSeg(t, mem, filepath.Join(dir, "b.seg"), 10, []tseries{{key: "k", kind: point.KindFloat, samples: floats(0, 3)}})
	outDir := t.TempDir()
	if err := mem.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The same name on the operating system's filesystem: not Merge's.
	bystander := filepath.Join(outDir, "out-000001.seg")
	if err := os.WriteFile(bystander, []byte("someone else's"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := &outputs{fs: mem, dir: outDir, blockSamples: 10}
	opts := o.mergeOpts()
	opts.TargetSegmentBytes = 1 // a new output per series: "a" is finished before "k" fails
	if _, _, err := Merge(context.Background(), []Input{{Reader: a}, {Reader: b}}, opts); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("Merge = %v, want ErrCorrupt", err)
	}
	if o.n.Load() < 2 {
		t.Fatalf("%d outputs created; the test needs a finished one before the failure", o.n.Load())
	}
	if names, _ := mem.ReadDir(outDir); len(names) != 0 {
		t.Fatalf("outputs left on the merge's filesystem: %v", names)
	}
	if b, err := os.ReadFile(bystander); err != nil || string(b) != "someone else's" {
		t.Fatalf("a file on another filesystem was touched: %q, %v", b, err)
	}

	opts.FS = nil
	if _, _, err := Merge(context.Background(), []Input{{Reader: a}}, opts); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("Merge with a nil FS = %v, want ErrInvalid", err)
	}
}

// TestMergeRandomCopies merges inputs whose series mostly follow one
// another in time, as flushes of a steady ingest do, so that whole blocks
// are copied to the outputs as stored, mixed with overlaps, drop ranges
// and the retention cutoff, which force decoding. The outputs must match a
// model, and copies must happen.
func TestMergeRandomCopies(t *testing.T) {
	kinds := []point.Kind{point.KindFloat, point.KindInt, point.KindUint, point.KindBool, point.KindString}
	kindOf := func(key string) point.Kind {
		var n int
		fmt.Sscanf(key, "m,k=%d", &n)
		return kinds[n%len(kinds)]
	}
	var copied, decoded int64
	for iter := range 40 {
		rng := rand.New(rand.NewPCG(uint64(iter), 78))
		fs := vfs.Default
		dir := t.TempDir()
		bs := 4 + rng.IntN(12)
		nin := 2 + rng.IntN(4)
		nkeys := 1 + rng.IntN(12)
		minTime := int64(math.MinInt64)
		if rng.IntN(3) == 0 {
			minTime = rng.Int64N(400)
		}
		want := mergeModel{}
		var inputs []Input
		var totalIn int64
		next := map[string]int64{} // where each series' next input starts
		for i := range nin {
			var series []tseries
			drops := map[string][]TimeRange{}
			for k := range nkeys {
				key := fmt.Sprintf("m,k=%02d f", k)
				kind := kindOf(key)
				tm := next[key]
				if rng.IntN(4) == 0 {
					tm -= rng.Int64N(20) // overlaps the previous input
				}
				var samples []point.Sample
				for range rng.IntN(6 * bs) {
					samples = append(samples, point.Sample{Time: tm, Value: testutil.RandValue(rng, kind)})
					tm += 1 + rng.Int64N(3)
				}
				next[key] = tm
				if len(samples) == 0 {
					continue
				}
				series = append(series, tseries{key: key, kind: kind, samples: samples})
				if rng.IntN(5) == 0 {
					lo := samples[0].Time + rng.Int64N(tm-samples[0].Time+1)
					drops[key] = append(drops[key], TimeRange{Min: lo, Max: lo + rng.Int64N(10)})
				}
				want.add(key, samples, minTime, drops[key])
				totalIn += int64(len(samples))
			}
			if len(series) == 0 {
				continue
			}
			r := writeSegOpts(t, filepath.Join(dir, fmt.Sprintf("in%d.seg", i)), segment.WriterOptions{FS: fs, BlockSamples: bs, InlineBytes: -1}, series)
			inputs = append(inputs, Input{Reader: r, Drop: func(key []byte) []TimeRange { return slices.Clone(drops[string(key)]) }})
		}
		wantModel, out := want.final()
		o := &outputs{fs: fs, dir: t.TempDir(), blockSamples: bs, inlineBytes: -1}
		opts := o.mergeOpts()
		opts.MinTime = minTime
		if rng.IntN(2) == 0 {
			opts.TargetSegmentBytes = 1 + rng.Int64N(3000)
		}
		metas, st, err := Merge(context.Background(), inputs, opts)
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		checkModel(t, readOutputs(t, fs, metas, kindOf), wantModel)
		checkMergeStats(t, iter, st, totalIn, out, len(wantModel))
		if t.Failed() {
			t.Fatalf("iter %d failed (inputs %d, keys %d, minTime %d, block %d)", iter, len(inputs), nkeys, minTime, bs)
		}
		copied += st.BlocksCopied
		decoded += st.BlocksRead
	}
	t.Logf("%d blocks copied, %d decoded", copied, decoded)
	if copied == 0 || decoded == 0 {
		t.Fatalf("%d blocks copied and %d decoded: both paths must run", copied, decoded)
	}
}

// mergeModel is what a merge must produce: key -> time -> value, each
// input's kept samples overwriting older ones.
type mergeModel map[string]map[int64]point.Value

// add applies one input's samples of key, less those before minTime or in
// a drop range.
func (mm mergeModel) add(key string, samples []point.Sample, minTime int64, drops []TimeRange) {
	m := mm[key]
	if m == nil {
		m = map[int64]point.Value{}
		mm[key] = m
	}
	for _, s := range samples {
		if s.Time < minTime || slices.ContainsFunc(drops, func(r TimeRange) bool { return r.Min <= s.Time && s.Time <= r.Max }) {
			continue
		}
		m[s.Time] = s.Value
	}
}

// final returns the model's series, sorted by time, and their samples in all.
func (mm mergeModel) final() (model, int64) {
	out := model{}
	var n int64
	for k, m := range mm {
		if len(m) == 0 {
			continue
		}
		var ss []point.Sample
		for tm, v := range m {
			ss = append(ss, point.Sample{Time: tm, Value: v})
		}
		slices.SortFunc(ss, func(a, b point.Sample) int { return cmpInt64(a.Time, b.Time) })
		out[k] = ss
		n += int64(len(ss))
	}
	return out, n
}

// checkMergeStats checks a merge's sample and series counts.
func checkMergeStats(t *testing.T, iter int, st MergeStats, in, out int64, series int) {
	t.Helper()
	if st.SamplesIn != in || st.SamplesOut != out || st.SamplesIn != st.SamplesOut+st.SamplesDropped+st.SamplesOverwritten {
		t.Errorf("iter %d: stats %+v, want in %d out %d and in = out + dropped + overwritten", iter, st, in, out)
	}
	if st.SeriesOut != int64(series) {
		t.Errorf("iter %d: SeriesOut %d, want %d", iter, st.SeriesOut, series)
	}
}
