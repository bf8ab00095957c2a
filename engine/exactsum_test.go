package engine

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/segment"
)

// TestFloatSumsFromBlockStats checks that float sums and means over whole
// blocks come from the blocks' exact partial sums, decoding nothing, and
// equal the exact sum rounded once (math/big) in every state, though the
// values were chosen so that adding them in time order, or block by block
// in float64, gives other bits.
func TestFloatSumsFromBlockStats(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 2))
	var pts []Point
	var raw []Sample
	var big float64
	for i := range 200 {
		var v float64
		switch i % 5 {
		case 0:
			big = float64(r.IntN(1000)+1) * 0x1p60
			v = big
		case 1:
			v = math.Round(r.Float64()*1e4) / 100
		case 2:
			v = -big // cancels, after the small value was lost in it
		default:
			v = (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(12)-6))
		}
		pts = append(pts, pt("m", []Tag{{Key: "dev", Value: "a"}}, "f", Float(v), int64(i)))
		raw = append(raw, Sample{Time: int64(i), Value: Float(v)})
	}
	want := exactSum(raw)
	var inOrder float64
	for _, s := range raw {
		inOrder += s.Value.Float()
	}
	if inOrder == want {
		t.Fatalf("the data does not tell exact sums from sums in time order (%v)", want)
	}

	opts := quietOptions()
	opts.BlockSamples = 8
	opts.DisableBackgroundCompaction = true
	dir := t.TempDir()
	db := openDB(t, dir, opts)
	mustWrite(t, db, pts[:120]...)
	mustFlush(t, db)
	mustWrite(t, db, pts[120:]...) // memtable and segment: sample path

	var decoded atomic.Int64
	check := func(where string, fromStats int64) {
		t.Helper()
		db.testOnBlockDecode = func() { decoded.Add(1) }
		defer func() { db.testOnBlockDecode = nil }()
		decoded.Store(0)
		pushed := db.st.blocksPushedDown.Load()
		for _, agg := range []Aggregate{AggSum, AggMean} {
			q := rawAll("m")
			q.Agg = agg
			got := samplesOf(t, mustQuery(t, db, q))
			w := want
			if agg == AggMean {
				w = want / float64(len(raw))
			}
			if len(got) != 1 || math.Float64bits(got[0].Value.Float()) != math.Float64bits(w) {
				t.Fatalf("%s: %v = %v, want %v", where, agg, got, w)
			}
		}
		if n := decoded.Load(); n != 0 {
			t.Fatalf("%s: %d blocks decoded, want 0", where, n)
		}
		if n := db.st.blocksPushedDown.Load() - pushed; n != 2*fromStats {
			t.Fatalf("%s: %d blocks from stats, want %d", where, n, 2*fromStats)
		}
	}
	check("segment and memtable", 15) // 120 samples in blocks of 8
	mustFlush(t, db)
	check("two segments", 25)
	mustCompact(t, db)
	check("compacted", 25)
	db = reopen(t, db, dir, opts)
	check("reopened", 25)

	// A newer sample overwrites one inside block 2 of the first segment:
	// that block is decoded and merged, the others still come from stats.
	old := raw[20].Value
	raw[20].Value = Float(1e-3)
	want = exactSum(raw)
	mustWrite(t, db, pt("m", []Tag{{Key: "dev", Value: "a"}}, "f", raw[20].Value, 20))
	db.testOnBlockDecode = func() { decoded.Add(1) }
	decoded.Store(0)
	q := rawAll("m")
	q.Agg = AggSum
	if got := samplesOf(t, mustQuery(t, db, q)); len(got) != 1 || got[0].Value.Float() != want || decoded.Load() != 1 {
		t.Fatalf("after overwriting %v: sum %v, want %v, %d blocks decoded", old, got, want, decoded.Load())
	}
	db.testOnBlockDecode = nil

	// Grouped with another series, in buckets: the same exact answers.
	mustWrite(t, db, pt("m", []Tag{{Key: "dev", Value: "b"}}, "f", Float(0.1), 3))
	q.GroupBy = []string{}
	got := samplesOf(t, mustQuery(t, db, q))
	if w := exactSum(append(raw, Sample{Time: 3, Value: Float(0.1)})); len(got) != 1 || got[0].Value.Float() != w {
		t.Fatalf("grouped sum %v, want %v", got, w)
	}
}

// TestBlockSumExactFloat: a float block's stats are used for sums only when
// it carries an exact partial (segment format 3).
func TestBlockSumExactFloat(t *testing.T) {
	old := segment.BlockMeta{Count: 3, Sum: Float(1.5)}
	if blockSumExact(&old, KindFloat) {
		t.Fatal("a block without a partial sum is trusted")
	}
	nw := segment.BlockMeta{Count: 3, Partial: []byte{1, 0, 0, 0}}
	if !blockSumExact(&nw, KindFloat) {
		t.Fatal("a block with a partial sum is not trusted")
	}
}

// TestPerSeriesBucketsHeldOneAtATime checks that a per-series aggregate
// turns each bucket into its result as soon as the next starts: a query
// with 20,000 buckets allocates about its result, not 20,000 bucket
// states (each holds an exact float accumulator of some 700 bytes).
func TestPerSeriesBucketsHeldOneAtATime(t *testing.T) {
	opts := quietOptions()
	opts.BlockSamples = 100
	db := openDB(t, t.TempDir(), opts)
	const n = 20_000
	pts := make([]Point, 0, n)
	for i := range n {
		pts = append(pts, pt("m", nil, "f", Float(float64(i%97)/10), int64(i)))
	}
	mustWrite(t, db, pts...)
	mustFlush(t, db)
	q := rawAll("m")
	q.Agg, q.Every = AggMean, 1
	mustQuery(t, db, q) // warm the reader's buffers
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := mustQuery(t, db, q)
	runtime.ReadMemStats(&after)
	if len(res) != 1 || len(res[0].Samples) != n {
		t.Fatalf("%d series", len(res))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Fatalf("the query allocated %d bytes for %d buckets", alloc, n)
	}
}
