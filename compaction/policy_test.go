package compaction

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/base"
)

// sseg builds a SegmentInfo for policy tests; times default to [0, 99].
func sseg(fileNum uint64, level int, size int64, first, last string) SegmentInfo {
	return SegmentInfo{FileNum: fileNum, Level: level, Size: size, FirstKey: []byte(first), LastKey: []byte(last), MinTime: 0, MaxTime: 99}
}

func withTimes(s SegmentInfo, lo, hi int64) SegmentInfo { s.MinTime, s.MaxTime = lo, hi; return s }
func tombstoned(s SegmentInfo) SegmentInfo              { s.Tombstoned = true; return s }

// fmtPlan renders a plan as "kind Lx->Ly reason [filenums in input order]".
func fmtPlan(p *Plan) string {
	if p == nil {
		return "nil"
	}
	nums := make([]string, len(p.Inputs))
	for i, s := range p.Inputs {
		nums[i] = fmt.Sprint(s.FileNum)
	}
	return fmt.Sprintf("%s L%d->L%d %s [%s]", p.Kind, p.Level, p.OutputLevel, p.Reason, strings.Join(nums, " "))
}

func TestPick(t *testing.T) {
	small := Policy{L1TargetBytes: 100, Multiplier: 10, MaxLevels: 4}
	f := func(name string, p Policy, levels [][]SegmentInfo, minTime int64, want string) {
		t.Helper()
		if got := fmtPlan(p.Pick(levels, minTime)); got != want {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
	none := int64(math.MinInt64)

	f("nothing", Policy{}, nil, none, "nil")
	f("empty levels", Policy{}, make([][]SegmentInfo, 7), 50, "nil")
	f("L0 below trigger", Policy{}, [][]SegmentInfo{{sseg(1, 0, 10, "a", "z"), sseg(2, 0, 10, "a", "z"), sseg(3, 0, 10, "a", "z")}}, none, "nil")

	l1 := []SegmentInfo{sseg(1, 1, 30, "a", "c"), sseg(7, 1, 30, "x", "z"), sseg(2, 1, 30, "d", "f")}
	f("L0 count: all L0 by FileNum after overlapping L1 by key", Policy{}, [][]SegmentInfo{
		{sseg(15, 0, 5, "b", "d"), sseg(13, 0, 5, "c", "c"), sseg(14, 0, 5, "e", "e"), sseg(16, 0, 5, "c", "d")}, l1,
	}, none, "merge L0->L1 l0-count [1 2 13 14 15 16]")
	f("L0 count without L1 overlap", Policy{L0Trigger: 2}, [][]SegmentInfo{
		{sseg(9, 0, 5, "g", "h"), sseg(8, 0, 5, "g", "w")}, l1,
	}, none, "merge L0->L1 l0-count [8 9]")
	f("L0 count with no L1 yet", Policy{L0Trigger: 2}, [][]SegmentInfo{
		{sseg(9, 0, 5, "g", "h"), sseg(8, 0, 5, "g", "w")},
	}, none, "merge L0->L1 l0-count [8 9]")
	f("L0 count touching L1 range ends", Policy{L0Trigger: 1}, [][]SegmentInfo{
		{sseg(9, 0, 5, "c", "x")}, l1,
	}, none, "merge L0->L1 l0-count [1 2 7 9]")

	f("expired first, only the first level that has any", Policy{}, [][]SegmentInfo{
		{withTimes(sseg(5, 0, 5, "a", "z"), 0, 10), sseg(6, 0, 5, "a", "z"), withTimes(sseg(4, 0, 5, "a", "z"), 0, 49), sseg(8, 0, 5, "a", "z")},
		{},
		{withTimes(sseg(2, 2, 5, "a", "b"), 0, 5)},
	}, 50, "drop-expired L0->L0 expired [4 5]")
	f("expired in L2", Policy{}, [][]SegmentInfo{
		{sseg(6, 0, 5, "a", "z")},
		{sseg(3, 1, 5, "a", "z")},
		{withTimes(sseg(2, 2, 5, "m", "n"), 0, 5), sseg(1, 2, 5, "a", "b"), withTimes(sseg(0, 2, 5, "c", "d"), -10, 49)},
	}, 50, "drop-expired L2->L2 expired [0 2]")
	f("MaxTime at the cutoff is not dropped whole", Policy{}, [][]SegmentInfo{{}, {withTimes(sseg(1, 1, 5, "a", "b"), 0, 50)}}, 50,
		"merge L1->L1 expired [1]")

	f("L1 over target: oldest L1 segment with overlapping L2", small, [][]SegmentInfo{
		{},
		{sseg(10, 1, 60, "d", "k"), sseg(11, 1, 60, "l", "p")},
		{sseg(3, 2, 50, "a", "c"), sseg(5, 2, 50, "j", "m"), sseg(4, 2, 50, "e", "f"), sseg(6, 2, 50, "q", "z")},
	}, none, "merge L1->L2 level-size [4 5 10]")
	f("level with the largest score wins", small, [][]SegmentInfo{
		{},
		{sseg(10, 1, 120, "d", "k")}, // 1.2
		{sseg(3, 2, 900, "a", "c"), sseg(2, 2, 600, "e", "z")}, // 1.5
		{sseg(1, 3, 5, "a", "z")},
	}, none, "merge L2->L3 level-size [1 2]")
	f("level exactly at target is fine", small, [][]SegmentInfo{{}, {sseg(10, 1, 100, "d", "k")}, {sseg(1, 2, 5, "a", "z")}}, none, "nil")
	f("last level is never pushed down", small, [][]SegmentInfo{{}, {}, {}, {sseg(1, 3, 1<<40, "a", "z")}}, none, "nil")
	f("L0 count beats level size", Policy{L0Trigger: 1, L1TargetBytes: 100}, [][]SegmentInfo{
		{sseg(20, 0, 1, "a", "b")},
		{sseg(10, 1, 500, "x", "y")},
	}, none, "merge L0->L1 l0-count [20]")
	f("expired beats L0 count", Policy{L0Trigger: 1}, [][]SegmentInfo{
		{sseg(20, 0, 1, "a", "b")},
		{withTimes(sseg(10, 1, 500, "x", "y"), 1, 2)},
	}, 10, "drop-expired L1->L1 expired [10]")

	f("tombstone in L0 pushes all of L0", Policy{}, [][]SegmentInfo{
		{sseg(21, 0, 1, "a", "b"), tombstoned(sseg(20, 0, 1, "c", "d"))},
		{sseg(10, 1, 5, "b", "c"), sseg(11, 1, 5, "x", "y")},
	}, none, "merge L0->L1 tombstones [10 20 21]")
	f("tombstone in L2 rewrites the oldest in place", Policy{}, [][]SegmentInfo{
		{},
		{sseg(12, 1, 5, "a", "z")},
		{tombstoned(sseg(9, 2, 5, "m", "n")), sseg(3, 2, 5, "a", "b"), tombstoned(sseg(5, 2, 5, "c", "d"))},
		{sseg(1, 3, 5, "a", "z")},
	}, none, "merge L2->L2 tombstones [5]")
	f("level size beats tombstones", small, [][]SegmentInfo{
		{tombstoned(sseg(21, 0, 1, "a", "b"))},
		{sseg(10, 1, 200, "b", "c")},
	}, none, "merge L1->L2 level-size [10]")

	bottom := func(lo, hi int64) [][]SegmentInfo {
		return [][]SegmentInfo{{}, {withTimes(sseg(7, 1, 5, "a", "z"), 0, 99)}, {},
			{withTimes(sseg(4, 3, 5, "m", "z"), 40, 99), withTimes(sseg(2, 3, 5, "a", "l"), lo, hi)}}
	}
	f("bottom segment a quarter expired is rewritten", Policy{}, bottom(0, 99), 25, "merge L3->L3 expired [2]")
	f("bottom segment barely expired is left", Policy{}, bottom(0, 99), 24, "nil")
	f("tighter ExpiredFraction", Policy{ExpiredFraction: 0.01}, bottom(0, 99), 1, "merge L3->L3 expired [2]")
	f("oldest of the expired bottom segments", Policy{}, bottom(0, 99), 60, "merge L3->L3 expired [2]")
	f("upper levels are not rewritten for expiry", Policy{}, bottom(50, 99), 40, "nil")
	f("no retention, no expiry", Policy{}, bottom(0, 99), none, "nil")
}

func TestPolicyDefaultsAndTargets(t *testing.T) {
	var p Policy
	f := func(level int, want int64) {
		t.Helper()
		if got := p.LevelTarget(level); got != want {
			t.Errorf("LevelTarget(%d) = %d, want %d", level, got, want)
		}
	}
	f(0, 0)
	f(1, 64<<20)
	f(2, 640<<20)
	f(3, 6400<<20)
	f(40, math.MaxInt64)
	p = Policy{L1TargetBytes: 1000, Multiplier: 4}
	f(1, 1000)
	f(3, 16000)
	d := Policy{}.withDefaults()
	if d.L0Trigger != 4 || d.Multiplier != 10 || d.L1TargetBytes != 64<<20 || d.MaxLevels != 7 || d.ExpiredFraction != 0.25 {
		t.Errorf("defaults: %+v", d)
	}
	if err := (Policy{}).Validate(); err != nil {
		t.Errorf("zero policy: %v", err)
	}
	for _, bad := range []Policy{{L0Trigger: -1}, {Multiplier: 1}, {Multiplier: -3}, {L1TargetBytes: -1}, {MaxLevels: 1}, {ExpiredFraction: 2}, {ExpiredFraction: math.NaN()}} {
		if err := bad.Validate(); !errors.Is(err, base.ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestPendingBytes(t *testing.T) {
	p := Policy{L0Trigger: 2, L1TargetBytes: 100, Multiplier: 10, MaxLevels: 4}
	f := func(levels [][]SegmentInfo, want int64) {
		t.Helper()
		if got := p.PendingBytes(levels); got != want {
			t.Errorf("PendingBytes = %d, want %d", got, want)
		}
	}
	f(nil, 0)
	f([][]SegmentInfo{{sseg(1, 0, 70, "a", "b")}}, 0)
	f([][]SegmentInfo{{sseg(1, 0, 70, "a", "b"), sseg(2, 0, 30, "a", "b")}}, 100)
	f([][]SegmentInfo{{}, {sseg(1, 1, 150, "a", "b")}, {sseg(2, 2, 900, "a", "b")}}, 50)
	// L3 is the last level: its size is never debt.
	f([][]SegmentInfo{{sseg(3, 0, 1, "a", "b")}, {sseg(1, 1, 150, "a", "b")}, {sseg(2, 2, 1100, "a", "b")}, {sseg(4, 3, 1<<30, "a", "b")}}, 150)
}

func TestCheckLevelsAndMaxSegments(t *testing.T) {
	good := [][]SegmentInfo{
		{sseg(5, 0, 1, "a", "z"), sseg(6, 0, 1, "a", "z")},
		{sseg(1, 1, 1, "m", "n"), sseg(2, 1, 1, "a", "b")},
		{},
		{sseg(3, 3, 1, "a", "z")},
	}
	if err := checkLevels(good); err != nil {
		t.Errorf("checkLevels(good) = %v", err)
	}
	if n := maxSegmentsPerQuery(good); n != 4 {
		t.Errorf("maxSegmentsPerQuery = %d, want 2 + 1 + 1", n)
	}
	if err := checkLevels([][]SegmentInfo{{}, {sseg(1, 1, 1, "a", "c"), sseg(2, 1, 1, "c", "d")}}); err == nil {
		t.Error("shared boundary key not reported as overlap")
	}
	if err := checkLevels([][]SegmentInfo{{sseg(1, 0, 1, "b", "a")}}); err == nil {
		t.Error("inverted key range not reported")
	}
}

// simKey renders key number i so that byte order is numeric order.
func simKey(i int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(i)) }

func simKeyNum(k []byte) int { return int(binary.BigEndian.Uint32(k)) }

// TestPolicySimulation feeds random flushes through Pick, carrying out every
// plan on a model of the levels, and checks the level invariants after each
// step and the targets once work has drained.
func TestPolicySimulation(t *testing.T) {
	for _, retention := range []bool{false, true} {
		for seed := range uint64(2) {
			t.Run(fmt.Sprintf("retention=%v/seed=%d", retention, seed), func(t *testing.T) {
				simulate(t, seed, retention)
			})
		}
	}
}

func simulate(t *testing.T, seed uint64, retention bool) {
	rng := rand.New(rand.NewPCG(seed, 11))
	p := Policy{L0Trigger: 4, Multiplier: 4, L1TargetBytes: 400, MaxLevels: 5}
	const (
		keySpace   = 100000
		segTarget  = 200 // output segment size
		flushes    = 120
		retainTime = 2000
	)
	levels := make([][]SegmentInfo, p.MaxLevels)
	var nextFile uint64
	var now int64
	var flushed, written int64
	plans := map[string]int{}

	// apply carries out a plan on levels, checking it first.
	apply := func(pl *Plan, minTime int64) {
		t.Helper()
		// Every input must be live in Level or OutputLevel, and inputs of
		// OutputLevel (when it differs) come first, by key, then Level's
		// (L0 by FileNum).
		where := map[uint64]int{}
		for l, segs := range levels {
			for _, s := range segs {
				where[s.FileNum] = l
			}
		}
		seenLevel := false
		var prev *SegmentInfo
		for i := range pl.Inputs {
			s := &pl.Inputs[i]
			l, ok := where[s.FileNum]
			if !ok || (l != pl.Level && l != pl.OutputLevel) {
				t.Fatalf("plan %s: input %d is not live in L%d or L%d", fmtPlan(pl), s.FileNum, pl.Level, pl.OutputLevel)
			}
			if l == pl.Level {
				if pl.Level == 0 && seenLevel && prev.FileNum >= s.FileNum {
					t.Fatalf("plan %s: L0 inputs not by FileNum", fmtPlan(pl))
				}
				seenLevel = true
			} else {
				if seenLevel {
					t.Fatalf("plan %s: L%d input %d after a L%d input", fmtPlan(pl), l, s.FileNum, pl.Level)
				}
				if prev != nil && bytes.Compare(prev.FirstKey, s.FirstKey) >= 0 {
					t.Fatalf("plan %s: output-level inputs not by key", fmtPlan(pl))
				}
			}
			prev = s
		}
		if pl.Level == 0 && pl.Kind == PlanMerge && len(pl.Inputs) != len(levels[0])+countLevel(pl.Inputs, where, 1) {
			t.Fatalf("plan %s: an L0 merge must take all %d L0 segments", fmtPlan(pl), len(levels[0]))
		}
		plans[pl.Reason]++
		remove := map[uint64]bool{}
		lo, hi := keySpace, -1
		var size int64
		mint, maxt := int64(math.MaxInt64), int64(math.MinInt64)
		for _, s := range pl.Inputs {
			remove[s.FileNum] = true
			lo, hi = min(lo, simKeyNum(s.FirstKey)), max(hi, simKeyNum(s.LastKey))
			size += s.Size
			mint, maxt = min(mint, s.MinTime), max(maxt, s.MaxTime)
		}
		for l := range levels {
			levels[l] = slices.DeleteFunc(levels[l], func(s SegmentInfo) bool { return remove[s.FileNum] })
		}
		if pl.Kind == PlanDropExpired {
			for _, s := range pl.Inputs {
				if s.MaxTime >= minTime {
					t.Fatalf("plan %s drops segment %d with data up to %d, cutoff %d", fmtPlan(pl), s.FileNum, s.MaxTime, minTime)
				}
			}
			return
		}
		if mint < minTime { // retention drops the expired share
			size = int64(float64(size) * float64(maxt-minTime+1) / float64(maxt-mint+1))
			mint = minTime
		}
		// Outputs: equal slices of the inputs' key range and bytes, at most
		// segTarget each, none of them empty.
		n := int((size + segTarget - 1) / segTarget)
		n = max(1, min(n, hi-lo+1))
		for i := range n {
			klo := lo + (hi-lo+1)*i/n
			khi := lo + (hi-lo+1)*(i+1)/n - 1
			nextFile++
			out := SegmentInfo{FileNum: nextFile, Level: pl.OutputLevel, Size: max(1, size/int64(n)),
				FirstKey: simKey(klo), LastKey: simKey(khi), MinTime: mint, MaxTime: maxt}
			written += out.Size
			levels[pl.OutputLevel] = append(levels[pl.OutputLevel], out)
		}
	}

	for range flushes {
		for range 1 + rng.IntN(5) {
			now += 10
			lo := rng.IntN(keySpace)
			hi := min(keySpace-1, lo+rng.IntN(keySpace/3))
			size := int64(50 + rng.IntN(100))
			tmin := now - 20
			if rng.IntN(10) == 0 { // backfill
				tmin -= rng.Int64N(3000)
			}
			nextFile++
			levels[0] = append(levels[0], SegmentInfo{FileNum: nextFile, Size: size, FirstKey: simKey(lo), LastKey: simKey(hi),
				MinTime: tmin, MaxTime: now, Tombstoned: rng.IntN(50) == 0})
			flushed += size
		}
		minTime := int64(math.MinInt64)
		if retention {
			minTime = now - retainTime
		}
		// Drain.
		for steps := 0; ; steps++ {
			pl := p.Pick(levels, minTime)
			if pl == nil {
				break
			}
			if steps > 2000 {
				t.Fatalf("compaction does not converge; last plan %s", fmtPlan(pl))
			}
			apply(pl, minTime)
			if err := checkLevels(levels); err != nil {
				t.Fatalf("after %s: %v", fmtPlan(pl), err)
			}
			checkQueryBound(t, rng, levels)
		}
		// Drained: L0 below trigger, levels within target, no tombstoned or
		// fully expired data left, and a bounded read fan-in.
		if len(levels[0]) >= p.L0Trigger {
			t.Fatalf("drained with %d L0 segments", len(levels[0]))
		}
		for l := 1; l < p.MaxLevels-1; l++ {
			if sz := levelBytes(levels[l]); sz > p.LevelTarget(l) {
				t.Fatalf("drained with L%d at %d bytes, target %d", l, sz, p.LevelTarget(l))
			}
		}
		for l, segs := range levels {
			for _, s := range segs {
				if s.Tombstoned || s.MaxTime < minTime {
					t.Fatalf("drained with L%d segment %+v (cutoff %d)", l, s, minTime)
				}
			}
		}
		if n, bound := maxSegmentsPerQuery(levels), p.L0Trigger-1+p.MaxLevels-1; n > bound {
			t.Fatalf("query bound %d after draining, want at most %d", n, bound)
		}
		if p.PendingBytes(levels) != 0 {
			t.Fatalf("drained with %d pending bytes", p.PendingBytes(levels))
		}
	}
	if levelBytes(levels[p.MaxLevels-1]) == 0 && !retention {
		t.Errorf("data never reached the last level: %v", levelSizes(levels))
	}
	t.Logf("levels %v, plans %v, write amplification %.1f", levelSizes(levels), plans, float64(flushed+written)/float64(flushed))
}

func countLevel(in []SegmentInfo, where map[uint64]int, level int) int {
	n := 0
	for _, s := range in {
		if where[s.FileNum] == level {
			n++
		}
	}
	return n
}

func levelSizes(levels [][]SegmentInfo) []int64 {
	out := make([]int64, len(levels))
	for l := range levels {
		out[l] = levelBytes(levels[l])
	}
	return out
}

// checkQueryBound probes random keys: the segments whose range holds the
// key never outnumber maxSegmentsPerQuery.
func checkQueryBound(t *testing.T, rng *rand.Rand, levels [][]SegmentInfo) {
	t.Helper()
	bound := maxSegmentsPerQuery(levels)
	for range 5 {
		k := simKey(rng.IntN(100000))
		n := 0
		for _, segs := range levels {
			for _, s := range segs {
				if bytes.Compare(s.FirstKey, k) <= 0 && bytes.Compare(k, s.LastKey) <= 0 {
					n++
				}
			}
		}
		if n > bound {
			t.Fatalf("key %x is in %d segments, bound %d", k, n, bound)
		}
	}
}

func TestPickBelow(t *testing.T) {
	p := Policy{}
	seg := func(num uint64, l int, first, last string, mint, maxt int64) SegmentInfo {
		return SegmentInfo{FileNum: num, Level: l, Size: 10, FirstKey: []byte(first), LastKey: []byte(last), MinTime: mint, MaxTime: maxt}
	}
	levels := [][]SegmentInfo{
		{seg(9, 0, "b", "c", 50, 90)},
		{seg(5, 1, "a", "b", 10, 60), seg(6, 1, "d", "e", 10, 60)},
		{seg(2, 2, "a", "z", 0, 40)},
	}
	if plan := p.PickBelow(levels, 0); plan != nil {
		t.Fatalf("nothing is below 0, got %+v", plan)
	}
	plan := p.PickBelow(levels, 55)
	if plan == nil || plan.Level != 0 || plan.OutputLevel != 1 || len(plan.Inputs) != 2 {
		t.Fatalf("L0 data below the floor: want L0 with the overlapping L1 segment into L1, got %+v", plan)
	}
	plan = p.PickBelow(levels, 30)
	if plan == nil || plan.Level != 1 || plan.OutputLevel != 1 || len(plan.Inputs) != 1 || plan.Inputs[0].FileNum != 5 {
		t.Fatalf("want the oldest L1 segment rewritten in place, got %+v", plan)
	}
	plan = p.PickBelow([][]SegmentInfo{nil, nil, {seg(2, 2, "a", "z", 0, 40)}}, 5)
	if plan == nil || plan.Level != 2 || plan.Inputs[0].FileNum != 2 {
		t.Fatalf("want the L2 segment rewritten, got %+v", plan)
	}
}

// maxSegmentsPerQuery bounds the segments a query for one series has to
// read: every L0 segment plus one per non-empty level >= 1, because
// segments of a level >= 1 do not overlap.
func maxSegmentsPerQuery(levels [][]SegmentInfo) int {
	n := 0
	for l, segs := range levels {
		switch {
		case l == 0:
			n += len(segs)
		case len(segs) > 0:
			n++
		}
	}
	return n
}
