package segment

import (
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
)

// writeHourRollups writes one series of each rollup kind: 1-minute
// buckets over 3 days and 10 hours starting 7 minutes into an hour (so
// rollup blocks cut at days and hours cut inside them), then 10-minute
// buckets (no hours), and returns the buckets written per series.
func writeHourRollups(t *testing.T, fs *memFS, path string) [][]Rollup {
	t.Helper()
	r := rand.New(rand.NewPCG(5, 6))
	w, err := Create(path, WriterOptions{FS: fs, BlockSamples: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var all [][]Rollup
	for i, k := range []point.Kind{point.KindFloat, point.KindInt, point.KindUint} {
		start := int64(1_800_000_000e9)/rollupHour*rollupHour + 7*60e9
		rs := testRollups(r, k, 3*1440+600, 60e9, start)
		// Gaps: drop some buckets, including a whole hour.
		kept := rs[:0]
		for j := range rs {
			if j%17 == 5 || (j >= 1500 && j < 1620) {
				continue
			}
			kept = append(kept, rs[j])
		}
		coarse := testRollups(r, k, 20, 600e9, kept[len(kept)-1].Start+600e9-kept[len(kept)-1].Start%600e9)
		rs = append(kept, coarse...)
		if err := w.AddRollups([]byte{'a' + byte(i)}, k, rs); err != nil {
			t.Fatal(err)
		}
		all = append(all, rs)
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return all
}

// TestRollupHours writes minute rollups spanning days and checks that
// each rollup block of minute buckets across more than one hour carries
// hours whose summaries are the folds of its buckets in each UTC hour,
// that other blocks carry none, and that CheckRollupHours accepts them.
func TestRollupHours(t *testing.T) {
	fs := newMemFS()
	all := writeHourRollups(t, fs, "/db/h.seg")
	rd, err := Open(fs, "/db/h.seg")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	if os.Getenv("STRATA_WRITE_SEEDS") != "" {
		writeSeed(t, "FuzzParseIndex", "v4-hours", rd.tab().raw)
	}
	for i := range all {
		si := rd.Series(i)
		withHours, buckets := 0, 0
		for b := range si.Rollups {
			rm := &si.Rollups[b]
			rus, err := rd.ReadRollups(si, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			buckets += len(rus)
			hours, ok, err := rd.ReadRollupHours(si, b, nil)
			if err != nil {
				t.Fatal(err)
			}
			spans := hourOf(rus[0].Start) != hourOf(rus[len(rus)-1].Start)
			if ok != (rm.Every <= rollupHoursMaxEvery && spans) {
				t.Fatalf("series %d block %d (every %d, %d..%d): hours %v", i, b, rm.Every, rus[0].Start, rus[len(rus)-1].Start, ok)
			}
			if !ok {
				continue
			}
			withHours++
			for _, h := range hours {
				var in []Rollup
				for _, ru := range rus {
					if hourOf(ru.Start) == hourOf(h.MinTime) {
						in = append(in, ru)
					}
				}
				if len(in) != h.Count || in[0].Start != h.MinTime || !sameSummary(h.Summary, summarize(in)) {
					t.Fatalf("series %d block %d hour %d: %d buckets, summary %+v, want %d buckets from %d, %+v", i, b, h.MinTime, h.Count, h.Summary, len(in), in[0].Start, summarize(in))
				}
			}
			if err := rd.CheckRollupHours(si, b); err != nil {
				t.Fatal(err)
			}
		}
		if withHours < 3 || buckets != len(all[i]) {
			t.Fatalf("series %d: %d blocks with hours, %d of %d buckets", i, withHours, buckets, len(all[i]))
		}
	}
}

// TestRollupHoursCorrupt flips every byte of one hours frame and checks
// that reading the hours or checking them reports corruption, never a
// wrong hour, and that the block's buckets still read.
func TestRollupHoursCorrupt(t *testing.T) {
	fs := newMemFS()
	writeHourRollups(t, fs, "/db/h.seg")
	rd, err := Open(fs, "/db/h.seg")
	if err != nil {
		t.Fatal(err)
	}
	// The block of series 0 with the smallest hours frame.
	si := rd.Series(0)
	b := -1
	for i, rm := range si.Rollups {
		if rm.HoursLength != 0 && (b < 0 || rm.HoursLength < si.Rollups[b].HoursLength) {
			b = i
		}
	}
	if b < 0 {
		t.Fatal("no hours")
	}
	rm := si.Rollups[b]
	rd.Close()
	orig := fs.bytes(t, "/db/h.seg")
	at := rm.Offset + int64(rm.Length)
	for off := at; off < at+int64(rm.HoursLength); off++ {
		data := append([]byte(nil), orig...)
		data[off] ^= 0x41
		fs.put("/db/h.seg", data)
		rd, err := Open(fs, "/db/h.seg")
		if err != nil {
			t.Fatal(err)
		}
		si := rd.Series(0)
		if _, _, err := rd.ReadRollupHours(si, b, nil); !errors.Is(err, base.ErrCorrupt) {
			t.Fatalf("byte %d flipped: hours read with %v", off-at, err)
		}
		if err := rd.CheckRollupHours(si, b); !errors.Is(err, base.ErrCorrupt) {
			t.Fatalf("byte %d flipped: check gave %v", off-at, err)
		}
		if _, err := rd.ReadRollups(si, b, nil); err != nil {
			t.Fatalf("byte %d of the hours flipped: block read with %v", off-at, err)
		}
		rd.Close()
	}
}

// FuzzParseRollupHours checks that any raw hours frame either parses into
// hours that hold the block's buckets and samples, in order, or is
// refused, never a panic.
func FuzzParseRollupHours(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	var rms []RollupMeta
	for _, k := range []point.Kind{point.KindFloat, point.KindInt} {
		rs := testRollups(r, k, 150, 60e9, 1_800_000_000e9/rollupHour*rollupHour+30*60e9)
		raw, ok := appendRollupHours(nil, k, rs)
		if !ok {
			f.Fatal("no hours")
		}
		f.Add(raw, byte(len(rms)))
		rm := RollupMeta{Every: 60e9, MinTime: rs[0].Start, MaxTime: rs[len(rs)-1].LastT, Count: len(rs), Summary: summarize(rs)}
		if _, err := parseRollupHours(nil, raw, k, &rm); err != nil {
			f.Fatalf("seed of %v: %v", k, err)
		}
		rms = append(rms, rm)
	}
	f.Fuzz(func(t *testing.T, raw []byte, kb byte) {
		k, rm := point.KindFloat, &rms[0]
		if kb%2 == 1 {
			k, rm = point.KindInt, &rms[1]
		}
		hours, err := parseRollupHours(nil, raw, k, rm)
		if err != nil {
			return
		}
		n, samples, prev := 0, int64(0), rm.MinTime-1
		for _, h := range hours {
			if h.MinTime <= prev || h.MaxTime < h.MinTime || h.Count < 1 {
				t.Fatalf("hour %+v after %d", h, prev)
			}
			n += h.Count
			samples += h.Summary.Count
			prev = h.MaxTime
		}
		if n != rm.Count || samples != rm.Summary.Count || prev != rm.MaxTime {
			t.Fatalf("hours hold %d buckets, %d samples, end %d", n, samples, prev)
		}
	})
}
