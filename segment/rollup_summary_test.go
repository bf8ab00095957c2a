package segment

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/xsum"
)

// numLess orders two numbers of one kind by value.
func numLess(a, b point.Value) bool {
	switch a.Kind() {
	case point.KindFloat:
		return a.Float() < b.Float()
	case point.KindInt:
		return a.Int() < b.Int()
	}
	return a.Uint() < b.Uint()
}

// TestRollupSummaries writes rollups of each kind and checks that no
// rollup block crosses a UTC day, that every rollup block's summary, read back from the index, is the fold of the
// block's buckets; and that a summary claiming fewer samples than the
// block's buckets is refused as corrupt.
func TestRollupSummaries(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	fs := newMemFS()
	w, err := Create("/db/s.seg", WriterOptions{FS: fs, BlockSamples: 16})
	if err != nil {
		t.Fatal(err)
	}
	kinds := []point.Kind{point.KindFloat, point.KindInt, point.KindUint}
	for i, k := range kinds {
		if err := w.AddRollups([]byte{'a' + byte(i)}, k, testRollups(r, k, 50, 60e9, -600e9)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	rd, err := Open(fs, "/db/s.seg")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if os.Getenv("STRATA_WRITE_SEEDS") != "" {
		writeSeed(t, "FuzzParseIndex", "v4-summaries", rd.tab().raw)
	}
	for i := range kinds {
		si := rd.Series(i)
		if len(si.Rollups) != 4 {
			t.Fatalf("series %d: %d rollup blocks", i, len(si.Rollups))
		}
		for b := range si.Rollups {
			rm := &si.Rollups[b]
			rus, err := rd.ReadRollups(si, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			if crossesDay(rm.MinTime, rus[len(rus)-1].Start) || (b == 0 && len(rus) != 10) {
				t.Fatalf("series %d block %d: %d buckets %d..%d cross a day", i, b, len(rus), rm.MinTime, rus[len(rus)-1].Start)
			}
			s := rm.Summary
			if s == nil {
				t.Fatalf("series %d block %d: no summary", i, b)
			}
			var n int64
			var acc xsum.Acc
			var sumI Int128
			mn, mx := rus[0], rus[0]
			for j := range rus {
				ru := &rus[j]
				n += ru.Count
				acc.Merge(&ru.SumF)
				lo := sumI.Lo + ru.SumI.Lo
				if lo < sumI.Lo {
					sumI.Hi++
				}
				sumI.Hi += ru.SumI.Hi
				sumI.Lo = lo
				if numLess(ru.Min, mn.Min) {
					mn = *ru
				}
				if numLess(mx.Max, ru.Max) {
					mx = *ru
				}
			}
			last := rus[len(rus)-1]
			wantSum := acc.AppendBinary(nil)
			if si.Kind != point.KindFloat {
				wantSum = nil
			} else {
				sumI = Int128{}
			}
			if s.Count != n || !bytes.Equal(s.SumF, wantSum) || s.SumI != sumI ||
				s.First != rus[0].First || s.FirstT != rus[0].FirstT || s.Last != last.Last || rm.MaxTime != last.LastT ||
				s.Min != mn.Min || s.MinT != mn.MinT || s.Max != mx.Max || s.MaxT != mx.MaxT {
				t.Fatalf("series %d block %d: summary %+v, buckets count %d min %v@%d max %v@%d", i, b, *s, n, mn.Min, mn.MinT, mx.Max, mx.MaxT)
			}
		}
	}
	// A summary of fewer samples than buckets: the index is corrupt.
	si := rd.Series(1)
	rm := si.Rollups[0]
	var c = rm
	c.Summary = &RollupSummary{}
	*c.Summary = *rm.Summary
	c.Summary.Count = int64(rm.Count) - 1
	for _, x := range []RollupMeta{rm, c} {
		raw := append([]byte{1}, appendSeriesEntry(nil, []byte("k"), si.Kind, []RollupMeta{x}, nil)...)
		_, err := parseIndex(raw, 4, headerLen, headerLen+int64(x.Length))
		if (x.Summary.Count >= int64(x.Count)) != (err == nil) {
			t.Fatalf("summary of %d samples in %d buckets: %v", x.Summary.Count, x.Count, err)
		}
	}
}
