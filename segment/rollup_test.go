package segment

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
)

// testRollups builds n buckets of kind k: count 1..5, values from r, the
// first nFine of every fine, the rest of every coarse (coarse first).
func testRollups(r *rand.Rand, k point.Kind, n int, every int64, start int64) []Rollup {
	var out []Rollup
	for i := range n {
		s := start + int64(i)*every
		ru := Rollup{Start: s, Every: every}
		c := 1 + r.IntN(5)
		for j := range c {
			t := s + int64(j)*(every/int64(c))
			var v point.Value
			switch k {
			case point.KindFloat:
				v = point.Float(r.NormFloat64() * 1e6)
			case point.KindInt:
				v = point.Int(r.Int64() >> r.IntN(64))
			default:
				v = point.Uint(r.Uint64() >> r.IntN(64))
			}
			if ru.Count == 0 {
				ru.First, ru.FirstT, ru.Min, ru.MinT, ru.Max, ru.MaxT = v, t, v, t, v, t
			}
			if v.Bits() < ru.Min.Bits() {
				ru.Min, ru.MinT = v, t
			}
			if v.Bits() > ru.Max.Bits() {
				ru.Max, ru.MaxT = v, t
			}
			ru.Last, ru.LastT = v, t
			ru.Count++
			switch k {
			case point.KindFloat:
				ru.SumF.Add(v.Float())
			case point.KindInt:
				ru.SumI.Lo += uint64(v.Int())
				ru.SumI.Hi = -1
			default:
				ru.SumI.Lo += v.Uint()
				ru.SumI.Hi = 7
			}
		}
		out = append(out, ru)
	}
	return out
}

func sameRollup(a, b *Rollup) bool {
	return a.Start == b.Start && a.Every == b.Every && a.Count == b.Count && a.SumI == b.SumI &&
		bytes.Equal(a.SumF.AppendBinary(nil), b.SumF.AppendBinary(nil)) &&
		a.First == b.First && a.Last == b.Last && a.Min == b.Min && a.Max == b.Max &&
		a.FirstT == b.FirstT && a.LastT == b.LastT && a.MinT == b.MinT && a.MaxT == b.MaxT
}

// TestRollupRoundTrip writes series with buckets of two widths and
// samples after them, and reads everything back.
func TestRollupRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fs := newMemFS()
	w, err := Create("/db/r.seg", WriterOptions{FS: fs, BlockSamples: 16})
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		key     string
		kind    point.Kind
		rus     []Rollup
		samples []point.Sample
	}
	var ws []want
	for i, k := range []point.Kind{point.KindFloat, point.KindInt, point.KindUint, point.KindFloat} {
		key := []byte{'a' + byte(i)}
		coarse := testRollups(r, k, 40, 3600e9, -7200e9)
		fine := testRollups(r, k, 37, 60e9, coarse[len(coarse)-1].Start+3600e9)
		rus := append(coarse, fine...)
		var samples []point.Sample
		if i != 3 { // the last series has only buckets
			for j := range 20 {
				samples = append(samples, point.Sample{Time: fine[len(fine)-1].Start + 60e9 + int64(j), Value: rus[0].First})
			}
		}
		if err := w.AddRollups(key, k, coarse[:25]); err != nil {
			t.Fatal(err)
		}
		if err := w.AddRollups(key, k, rus[25:]); err != nil {
			t.Fatal(err)
		}
		if err := w.Add(key, k, samples); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, want{string(key), k, rus, samples})
	}
	meta, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	rd, err := Open(fs, "/db/r.seg")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if rd.Meta().Samples != meta.Samples || meta.MinTime != -7200e9 {
		t.Fatalf("meta %+v, reader %+v", meta, rd.Meta())
	}
	for i, w := range ws {
		si := rd.Series(i)
		if string(si.Key) != w.key || si.Kind != w.kind || len(si.Blocks) == 0 != (len(w.samples) == 0) {
			t.Fatalf("series %d: %q %v %d blocks", i, si.Key, si.Kind, len(si.Blocks))
		}
		var got []Rollup
		for b := range si.Rollups {
			if got, err = rd.ReadRollups(si, b, got); err != nil {
				t.Fatal(err)
			}
		}
		if len(got) != len(w.rus) {
			t.Fatalf("series %d: %d buckets, want %d", i, len(got), len(w.rus))
		}
		for j := range got {
			if !sameRollup(&got[j], &w.rus[j]) {
				t.Fatalf("series %d bucket %d:\n got %+v\nwant %+v", i, j, got[j], w.rus[j])
			}
		}
		samples, err := rd.AppendRange(si, math.MinInt64, math.MaxInt64, nil)
		if err != nil || len(samples) != len(w.samples) {
			t.Fatalf("series %d: %d samples (%v), want %d", i, len(samples), err, len(w.samples))
		}
		if si.MinTime() != w.rus[0].Start {
			t.Fatalf("series %d: MinTime %d", i, si.MinTime())
		}
	}
	// Damage a rollup block: its checksum says so.
	data := fs.bytes(t, "/db/r.seg")
	si := rd.Series(0)
	data[si.Rollups[1].Offset+3] ^= 0xff
	fs.put("/db/bad.seg", data)
	bad, err := Open(fs, "/db/bad.seg")
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.ReadRollups(bad.Series(0), 1, nil); !errors.Is(err, base.ErrCorrupt) || !errors.Is(err, ErrChecksum) {
		t.Fatalf("damaged rollup block: %v", err)
	}
}

// TestAddRollupsRejects checks that bad buckets leave the writer usable.
func TestAddRollupsRejects(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	fs := newMemFS()
	w, err := Create("/db/r.seg", WriterOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	good := testRollups(r, point.KindFloat, 3, 60e9, 0)
	bad := func(f func(r *Rollup)) []Rollup {
		rs := testRollups(r, point.KindFloat, 3, 60e9, 0)
		f(&rs[1])
		return rs
	}
	for name, rs := range map[string][]Rollup{
		"zero every":     bad(func(r *Rollup) { r.Every = 0 }),
		"unaligned":      bad(func(r *Rollup) { r.Start++ }),
		"zero count":     bad(func(r *Rollup) { r.Count = 0 }),
		"out of bucket":  bad(func(r *Rollup) { r.LastT = r.Start + r.Every }),
		"not increasing": bad(func(r *Rollup) { r.Start, r.FirstT, r.LastT, r.MinT, r.MaxT = 0, 0, 0, 0, 0 }),
		"wrong kind":     bad(func(r *Rollup) { r.Max = point.Int(1) }),
	} {
		if err := w.AddRollups([]byte("k"), point.KindFloat, rs); !errors.Is(err, base.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := w.AddRollups([]byte("s"), point.KindString, nil); !errors.Is(err, base.ErrInvalid) {
		t.Errorf("string series: %v", err)
	}
	if err := w.AddRollups([]byte("k"), point.KindFloat, good); err != nil {
		t.Fatal(err)
	}
	if err := w.Add([]byte("k"), point.KindFloat, []point.Sample{{Time: 1e12, Value: point.Float(1)}}); err != nil {
		t.Fatal(err)
	}
	if err := w.AddRollups([]byte("k"), point.KindFloat, testRollups(r, point.KindFloat, 1, 60e9, 1e13)); !errors.Is(err, base.ErrInvalid) {
		t.Errorf("rollups after samples: %v", err)
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecodeRollupBlock feeds arbitrary bytes to the rollup block decoder,
// past the checksum, with an index entry taken from the bytes themselves:
// it must fail cleanly or return consistent buckets that encode back to
// the same bytes.
func FuzzDecodeRollupBlock(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, k := range []point.Kind{point.KindFloat, point.KindInt, point.KindUint} {
		for _, n := range []int{1, 3, 130} {
			var sc blockScratch
			rs := testRollups(r, k, n, 60e9, -120e9)
			f.Add(appendRollupBlock(nil, k, 60e9, rs, &sc))
		}
	}
	f.Add([]byte{rollupTag, 1, 1, 1})
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) < 2 {
			return
		}
		var sc blockScratch
		kind := point.Kind(raw[1])
		rs, err := parseRollupBlock(nil, raw, kind, &sc)
		if err != nil {
			return
		}
		for i := range rs {
			ru := &rs[i]
			if ru.Count < 1 || ru.Every != rs[0].Every || ru.Start%ru.Every != 0 || ru.FirstT < ru.Start || ru.LastT-ru.Start >= ru.Every ||
				(i > 0 && (ru.Start <= rs[i-1].Start || ru.FirstT <= rs[i-1].LastT)) || ru.First.Kind() != kind || ru.Max.Kind() != kind {
				t.Fatalf("bucket %d inconsistent: %+v", i, ru)
			}
		}
		again, err := parseRollupBlock(nil, appendRollupBlock(nil, kind, rs[0].Every, rs, &sc), kind, &sc)
		if err != nil || len(again) != len(rs) {
			t.Fatalf("re-encoded: %v", err)
		}
		for i := range rs {
			if !sameRollup(&rs[i], &again[i]) {
				t.Fatalf("bucket %d changed in a round trip", i)
			}
		}
	})
}
