package compaction

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/segment"
)

// tseries is one series of a test segment. Samples are handed to the
// writer in chunks of the given sizes (the rest in one last Add).
type tseries struct {
	key     string
	kind    point.Kind
	samples []point.Sample
	chunks  []int
}

// writeSeg writes a segment holding series (sorted by key here) and opens it.
func writeSeg(t testing.TB, fs vfs.FS, path string, blockSamples int, series []tseries) *segment.Reader {
	t.Helper()
	return writeSegOpts(t, path, segment.WriterOptions{FS: fs, BlockSamples: blockSamples}, series)
}

// writeSegOpts is writeSeg with every writer option.
func writeSegOpts(t testing.TB, path string, wo segment.WriterOptions, series []tseries) *segment.Reader {
	t.Helper()
	fs := wo.FS
	series = slices.Clone(series)
	slices.SortFunc(series, func(a, b tseries) int { return strings.Compare(a.key, b.key) })
	w, err := segment.Create(path, wo)
	if err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	for _, s := range series {
		rest := s.samples
		for _, n := range s.chunks {
			n = min(n, len(rest))
			if err := w.Add([]byte(s.key), s.kind, rest[:n]); err != nil {
				t.Fatalf("add %s: %v", s.key, err)
			}
			rest = rest[n:]
		}
		if len(rest) > 0 || len(s.chunks) == 0 {
			if err := w.Add([]byte(s.key), s.kind, rest); err != nil {
				t.Fatalf("add %s: %v", s.key, err)
			}
		}
	}
	if _, err := w.Finish(); err != nil {
		t.Fatalf("finish %s: %v", path, err)
	}
	r, err := segment.Open(fs, path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// outputs hands out writers named dir/out-N.seg.
type outputs struct {
	fs           vfs.FS
	dir          string
	blockSamples int
	inlineBytes  int // segment.WriterOptions.InlineBytes
	n            atomic.Int64
}

func (o *outputs) newOutput() (*segment.Writer, error) {
	n := o.n.Add(1)
	return segment.Create(filepath.Join(o.dir, fmt.Sprintf("out-%06d.seg", n)), segment.WriterOptions{FS: o.fs, BlockSamples: o.blockSamples, InlineBytes: o.inlineBytes})
}

// mergeOpts returns options that keep every sample and write to o.
func (o *outputs) mergeOpts() MergeOptions {
	return MergeOptions{MinTime: math.MinInt64, NewOutput: o.newOutput, BlockSamples: o.blockSamples, FS: o.fs}
}

// model is the expected content: key -> samples sorted by time.
type model map[string][]point.Sample

// readOutputs reads every series of the outputs, checking that keys are
// strictly increasing across the outputs, that FirstKey/LastKey match and
// that every series has the kind kindOf gives it.
func readOutputs(t testing.TB, fs vfs.FS, metas []segment.Meta, kindOf func(key string) point.Kind) model {
	t.Helper()
	got := model{}
	var prev []byte
	for i, m := range metas {
		r, err := segment.Open(fs, m.Path)
		if err != nil {
			t.Fatalf("open output %d: %v", i, err)
		}
		if r.NumSeries() == 0 {
			t.Errorf("output %d (%s) is empty", i, m.Path)
		}
		for j := range r.NumSeries() {
			s := r.Series(j)
			if prev != nil && bytes.Compare(prev, s.Key) >= 0 {
				t.Errorf("output %d series %d: key %q not after %q", i, j, s.Key, prev)
			}
			prev = append(prev[:0], s.Key...)
			if j == 0 && !bytes.Equal(s.Key, m.FirstKey) {
				t.Errorf("output %d: FirstKey %q, first series %q", i, m.FirstKey, s.Key)
			}
			if j == r.NumSeries()-1 && !bytes.Equal(s.Key, m.LastKey) {
				t.Errorf("output %d: LastKey %q, last series %q", i, m.LastKey, s.Key)
			}
			if kindOf != nil && s.Kind != kindOf(string(s.Key)) {
				t.Errorf("series %q: kind %s, want %s", s.Key, s.Kind, kindOf(string(s.Key)))
			}
			var all []point.Sample
			for b := range s.Blocks {
				all, err = r.ReadBlock(s, b, all)
				if err != nil {
					t.Fatalf("read output %d series %q block %d: %v", i, s.Key, b, err)
				}
			}
			if len(all) == 0 {
				t.Errorf("series %q written with no samples", s.Key)
			}
			got[string(s.Key)] = all
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// checkModel compares got with want, reporting the first few differences.
func checkModel(t testing.TB, got, want model) {
	t.Helper()
	errs := 0
	for k, ws := range want {
		gs, ok := got[k]
		if !ok {
			t.Errorf("series %q missing (want %d samples)", k, len(ws))
			errs++
		} else if !samplesEqual(gs, ws) {
			t.Errorf("series %q:\n got %v\nwant %v", k, fmtSamples(gs), fmtSamples(ws))
			errs++
		}
		if errs > 5 {
			t.FailNow()
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected series %q", k)
		}
	}
}

func samplesEqual(a, b []point.Sample) bool {
	return slices.EqualFunc(a, b, func(x, y point.Sample) bool { return x.Time == y.Time && x.Value.Equal(y.Value) })
}

func fmtSamples(s []point.Sample) string {
	if len(s) > 20 {
		return fmt.Sprintf("%v ... (%d samples)", fmtSamples(s[:20]), len(s))
	}
	var b strings.Builder
	for _, x := range s {
		fmt.Fprintf(&b, "%d=%s ", x.Time, x.Value)
	}
	return b.String()
}

// floats builds float samples at the given times with value = time + add.
func floats(add float64, times ...int64) []point.Sample {
	out := make([]point.Sample, len(times))
	for i, t := range times {
		out[i] = point.Sample{Time: t, Value: point.Float(float64(t) + add)}
	}
	return out
}

// span returns the times lo, lo+step, ... up to hi inclusive.
func span(lo, hi, step int64) []int64 {
	var out []int64
	for t := lo; t <= hi; t += step {
		out = append(out, t)
	}
	return out
}

// listDir returns the names in dir.
func listDir(t testing.TB, dir string) []string {
	t.Helper()
	names, err := vfs.Default.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// checkLevels reports the first violation of the level invariants: a
// segment whose FirstKey is after its LastKey, or two segments of one level
// >= 1 whose key ranges overlap.
func checkLevels(levels [][]SegmentInfo) error {
	for l, segs := range levels {
		for _, s := range segs {
			if bytes.Compare(s.FirstKey, s.LastKey) > 0 {
				return fmt.Errorf("compaction: L%d segment %d: first key %q after last key %q", l, s.FileNum, s.FirstKey, s.LastKey)
			}
		}
		if l == 0 {
			continue
		}
		sorted := slices.Clone(segs)
		slices.SortFunc(sorted, cmpFirstKey)
		for i := 1; i < len(sorted); i++ {
			a, b := sorted[i-1], sorted[i]
			if bytes.Compare(a.LastKey, b.FirstKey) >= 0 {
				return fmt.Errorf("compaction: L%d segments %d [%q, %q] and %d [%q, %q] overlap",
					l, a.FileNum, a.FirstKey, a.LastKey, b.FileNum, b.FirstKey, b.LastKey)
			}
		}
	}
	return nil
}
