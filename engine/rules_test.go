package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const hourNs = int64(time.Hour)

// ruleFixture: series with different keeps under one rule list.
//
//	m,host=a  rule 1 (m, host="a")     1h
//	m,host=b  rule 2 ("", host=~"a|b") 3h
//	n,host=a  rule 2 (rule 1 is m's)   3h
//	n,host=b  rule 2: only a 4h-old sample, so invisible whole
//	m,host=c  no rule: Retention        10h
//	k,host=z  rule 3 (k) forever
func ruleFixture() (rules []RetentionRule, retention time.Duration) {
	return []RetentionRule{
		{Measurement: "m", Matchers: []Matcher{{Key: "host", Op: MatchEqual, Value: "a"}}, Keep: time.Hour},
		{Matchers: []Matcher{{Key: "host", Op: MatchRegexp, Value: "a|b"}}, Keep: 3 * time.Hour},
		{Measurement: "k", Keep: 0},
	}, 10 * time.Hour
}

var ruleAges = []int64{30 * int64(time.Minute), 2 * hourNs, 5 * hourNs, 20 * hourNs}

func writeRuleFixture(t *testing.T, db *DB, base int64) {
	t.Helper()
	var pts []Point
	for _, s := range []struct{ m, host string }{{"m", "a"}, {"m", "b"}, {"n", "a"}, {"m", "c"}, {"k", "z"}} {
		for _, age := range ruleAges {
			pts = append(pts, pt(s.m, []Tag{{Key: "host", Value: s.host}}, "v", Float(float64(age)), base-age))
		}
	}
	pts = append(pts, pt("n", []Tag{{Key: "host", Value: "b"}}, "v", Float(1), base-4*hourNs))
	mustWrite(t, db, pts...)
}

// ruleWant is what the fixture shows at base: visible ages per series key.
func ruleWant(base int64) map[string][]int64 {
	times := func(n int) []int64 {
		var out []int64
		for i := n - 1; i >= 0; i-- {
			out = append(out, base-ruleAges[i])
		}
		return out
	}
	return map[string][]int64{
		"m,host=a": times(1), "m,host=b": times(2), "n,host=a": times(2),
		"m,host=c": times(3), "k,host=z": times(4),
	}
}

func seriesName(s Series) string {
	var b strings.Builder
	b.WriteString(s.Measurement)
	for _, t := range s.Tags {
		fmt.Fprintf(&b, ",%s=%s", t.Key, t.Value)
	}
	return b.String()
}

// checkRuleReads checks every read path against want (series key -> the
// visible times, ascending).
func checkRuleReads(t *testing.T, db *DB, want map[string][]int64, state string) {
	t.Helper()
	ctx := context.Background()
	got := map[string][]int64{}
	for _, m := range []string{"m", "n", "k"} {
		for _, s := range mustQuery(t, db, rawAll(m)) {
			for _, x := range s.Samples {
				got[seriesName(s)] = append(got[seriesName(s)], x.Time)
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: Query\n got %v\nwant %v", state, got, want)
	}
	// QuerySeq.
	seq := map[string][]int64{}
	for _, m := range []string{"m", "n", "k"} {
		for s, err := range db.QuerySeq(ctx, rawAll(m)) {
			if err != nil {
				t.Fatalf("%s: QuerySeq: %v", state, err)
			}
			for _, x := range s.Samples {
				seq[seriesName(s)] = append(seq[seriesName(s)], x.Time)
			}
		}
	}
	if fmt.Sprint(seq) != fmt.Sprint(want) {
		t.Fatalf("%s: QuerySeq\n got %v\nwant %v", state, seq, want)
	}
	// Aggregates, per series and grouped.
	for _, m := range []string{"m", "n", "k"} {
		q := rawAll(m)
		q.Agg = AggCount
		for _, s := range mustQuery(t, db, q) {
			if n := int(s.Samples[0].Value.Int()); n != len(want[seriesName(s)]) {
				t.Fatalf("%s: count of %s = %d, want %d", state, seriesName(s), n, len(want[seriesName(s)]))
			}
		}
		q.GroupBy = []string{}
		wantN := 0
		for k, v := range want {
			if strings.HasPrefix(k, m+",") {
				wantN += len(v)
			}
		}
		res := mustQuery(t, db, q)
		gotN := 0
		if len(res) == 1 {
			gotN = int(res[0].Samples[0].Value.Int())
		}
		if gotN != wantN {
			t.Fatalf("%s: grouped count of %s = %d, want %d", state, m, gotN, wantN)
		}
	}
	// Metadata: only series with a visible sample.
	infos, err := db.SeriesInfo(ctx, Selector{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range infos {
		names = append(names, seriesName(Series{Measurement: in.Measurement, Tags: in.Tags}))
	}
	var wantNames []string
	for k := range want {
		wantNames = append(wantNames, k)
	}
	slices.Sort(names)
	slices.Sort(wantNames)
	if !slices.Equal(names, wantNames) {
		t.Fatalf("%s: SeriesInfo %v, want %v", state, names, wantNames)
	}
	vals, err := db.TagValues(ctx, "host", Selector{Measurement: "n"})
	if err != nil {
		t.Fatal(err)
	}
	var wantVals []string
	for k := range want {
		if v, ok := strings.CutPrefix(k, "n,host="); ok {
			wantVals = append(wantVals, v)
		}
	}
	slices.Sort(wantVals)
	if !slices.Equal(vals, wantVals) {
		t.Fatalf("%s: TagValues(n, host) %v, want %v", state, vals, wantVals)
	}
	// Last.
	last, err := db.Last(ctx, Selector{})
	if err != nil {
		t.Fatal(err)
	}
	lastGot := map[string]int64{}
	for _, s := range last {
		lastGot[seriesName(s)] = s.Samples[0].Time
	}
	lastWant := map[string]int64{}
	for k, v := range want {
		if len(v) > 0 {
			lastWant[k] = v[len(v)-1]
		}
	}
	if fmt.Sprint(lastGot) != fmt.Sprint(lastWant) {
		t.Fatalf("%s: Last %v, want %v", state, lastGot, lastWant)
	}
}

// TestRetentionRulesHideEveryPath: each series keeps what its first
// matching rule says (Retention when none does) on every read path, in
// every state of the data, and a Keep-0 rule keeps forever.
func TestRetentionRulesHideEveryPath(t *testing.T) {
	base := int64(1000 * hourNs)
	rules, retention := ruleFixture()
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	opts.Retention = retention
	opts.RetentionRules = rules
	opts.Now = func() time.Time { return time.Unix(0, base) }
	dir := t.TempDir()
	db := openDB(t, dir, opts)
	writeRuleFixture(t, db, base)
	want := ruleWant(base)
	checkRuleReads(t, db, want, "memtable")
	mustFlush(t, db)
	checkRuleReads(t, db, want, "flushed")
	mustCompact(t, db)
	checkRuleReads(t, db, want, "compacted")
	db = reopen(t, db, dir, opts)
	checkRuleReads(t, db, want, "reopened")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro := *opts
	ro.ReadOnly = true
	db = openDB(t, dir, &ro)
	checkRuleReads(t, db, want, "read-only")
	// A read-only DB takes rules too: they only change what it shows.
	if err := db.SetRetentionRules(nil); err != nil {
		t.Fatalf("read-only SetRetentionRules: %v", err)
	}
	all := ruleWant(base)
	all["m,host=a"] = all["m,host=c"]
	all["m,host=b"] = all["m,host=c"]
	all["n,host=a"] = all["m,host=c"]
	all["n,host=b"] = []int64{base - 4*hourNs}
	all["k,host=z"] = all["m,host=c"]
	// Compaction ran with the rules on: what it dropped stays dropped.
	checkRuleReadsSubset(t, db, all, "read-only, rules removed")
}

// checkRuleReadsSubset checks that Query shows at most want and at least
// the newest sample of each series in it.
func checkRuleReadsSubset(t *testing.T, db *DB, want map[string][]int64, state string) {
	t.Helper()
	for _, m := range []string{"m", "n", "k"} {
		for _, s := range mustQuery(t, db, rawAll(m)) {
			w := want[seriesName(s)]
			for _, x := range s.Samples {
				if !slices.Contains(w, x.Time) {
					t.Fatalf("%s: %s shows %d, not in %v", state, seriesName(s), x.Time, w)
				}
			}
		}
	}
}

// TestRetentionRulesAtRunTime: SetRetentionRules changes what reads show
// at once, both ways while compaction has not dropped anything, and
// rejects bad rules without changing anything.
func TestRetentionRulesAtRunTime(t *testing.T) {
	base := int64(1000 * hourNs)
	rules, retention := ruleFixture()
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	opts.Retention = retention
	opts.Now = func() time.Time { return time.Unix(0, base) }
	db := openDB(t, t.TempDir(), opts)
	writeRuleFixture(t, db, base)
	mustFlush(t, db)
	if got := len(samplesOf(t, mustQuery(t, db, Query{Selector: Selector{Measurement: "m", Tags: []Tag{{Key: "host", Value: "a"}}, Start: minTime, End: maxTime}}))); got != 3 {
		t.Fatalf("without rules m,host=a shows %d samples, want 3 (Retention)", got)
	}
	if err := db.SetRetentionRules(rules); err != nil {
		t.Fatal(err)
	}
	checkRuleReads(t, db, ruleWant(base), "rules set at run time")

	for _, bad := range [][]RetentionRule{
		{{Measurement: "m", Keep: -time.Second}},
		{{Matchers: []Matcher{{Key: "", Op: MatchEqual, Value: "x"}}, Keep: time.Hour}},
		{{Matchers: []Matcher{{Key: "host", Op: MatchRegexp, Value: "(("}}, Keep: time.Hour}},
		{{Matchers: []Matcher{{Key: "host", Op: MatchOp(99), Value: "x"}}, Keep: time.Hour}},
		{{Measurement: "a\nb", Keep: time.Hour}},
	} {
		if err := db.SetRetentionRules(bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("SetRetentionRules(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	checkRuleReads(t, db, ruleWant(base), "after rejected rules")
	bad := *opts
	bad.RetentionRules = []RetentionRule{{Keep: -1}}
	if _, err := Open(t.TempDir(), &bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open with a negative Keep: %v, want ErrInvalid", err)
	}

	// Lengthened (nothing compacted yet): shown again.
	if err := db.SetRetentionRules([]RetentionRule{{Measurement: "m", Keep: 100 * time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if got := len(samplesOf(t, mustQuery(t, db, Query{Selector: Selector{Measurement: "m", Tags: []Tag{{Key: "host", Value: "a"}}, Start: minTime, End: maxTime}}))); got != 4 {
		t.Fatalf("lengthened rule: m,host=a shows %d samples, want 4", got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.SetRetentionRules(rules); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetRetentionRules after Close = %v, want ErrClosed", err)
	}
}

// TestRetentionRulesCompactionDrops: compaction drops what the rules
// expired from the bottom-most data, counted in the segments' samples.
func TestRetentionRulesCompactionDrops(t *testing.T) {
	base := int64(1000 * hourNs)
	var now atomic.Int64
	now.Store(base)
	rules, retention := ruleFixture()
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	opts.Retention = retention
	opts.Now = func() time.Time { return time.Unix(0, now.Load()) }
	db := openDB(t, t.TempDir(), opts)
	writeRuleFixture(t, db, base)
	mustFlush(t, db)
	mustCompact(t, db)
	total := db.Stats().SegmentSamples
	if total != 21 {
		t.Fatalf("segments hold %d samples, want 21", total)
	}
	if err := db.SetRetentionRules(rules); err != nil {
		t.Fatal(err)
	}
	mustCompact(t, db)
	// Visible: 1+2+2+3+4 = 12; m,host=c keeps its 20h-old sample until
	// Retention drops it, which is 10h: dropped too.
	if got := db.Stats().SegmentSamples; got != 12 {
		t.Fatalf("after compaction with rules, segments hold %d samples, want 12", got)
	}
	checkRuleReads(t, db, ruleWant(base), "compacted with rules")
	// Removing the rules shows nothing that was dropped.
	if err := db.SetRetentionRules(nil); err != nil {
		t.Fatal(err)
	}
	checkRuleReadsSubset(t, db, ruleWant(base), "rules removed after the drop")
	// An hour later m,host=a's last sample expires: hidden at once, but a
	// rewrite for 30 minutes of a 20-hour segment is not worth it yet.
	if err := db.SetRetentionRules(rules); err != nil {
		t.Fatal(err)
	}
	now.Store(base + hourNs)
	mustCompact(t, db)
	if got := db.Stats().SegmentSamples; got != 12 {
		t.Fatalf("an hour later, segments hold %d samples, want 12 (no rewrite yet)", got)
	}
	if res := mustQuery(t, db, Query{Selector: Selector{Measurement: "m", Tags: []Tag{{Key: "host", Value: "a"}}, Start: minTime, End: maxTime}}); len(res) != 0 {
		t.Fatalf("an hour later m,host=a shows %s", formatSeries(res))
	}
	// Ten hours later every series but k's has expired: one rewrite
	// drops them all.
	now.Store(base + 10*hourNs)
	mustCompact(t, db)
	if got := db.Stats().SegmentSamples; got != 4 {
		t.Fatalf("ten hours later, segments hold %d samples, want 4", got)
	}
	if got := len(samplesOf(t, mustQuery(t, db, rawAll("k")))); got != 4 {
		t.Fatalf("k shows %d samples, want 4", got)
	}
}

// TestRetentionRulesNeverResurrect: v1 at t, then v2 over it in a newer
// segment; a rule expires t, compaction runs, the rule is lengthened: t
// reads v2 or nothing, never v1. In the deep case v1 sits in L2 with a
// wide time span (so no rule rewrite touches it) while v2's merge into L1
// runs under the short rule: dropping v2 there would uncover v1.
func TestRetentionRulesNeverResurrect(t *testing.T) {
	for _, deep := range []bool{false, true} {
		t.Run(fmt.Sprint("deep=", deep), func(t *testing.T) {
			base := int64(1000 * hourNs)
			var now atomic.Int64
			now.Store(base)
			opts := quietOptions()
			opts.DisableBackgroundCompaction = true
			opts.L0CompactionTrigger = 2
			if deep {
				opts.L0CompactionTrigger = 1
				opts.L1TargetBytes = 4096
				opts.LevelMultiplier = 1000
			}
			opts.Now = func() time.Time { return time.Unix(0, now.Load()) }
			dir := t.TempDir()
			db := openDB(t, dir, opts)
			ts := base - hourNs/2
			host := []Tag{{Key: "host", Value: "a"}}
			pts := []Point{pt("m", host, "v", String("v1"), ts), pt("m", host, "v", String("keep"), base)}
			if deep {
				for i := range 5000 {
					pts = append(pts, pt("o", nil, "v", Float(float64(i)*1.37), base-1000*hourNs+int64(i)*int64(time.Minute)))
				}
			}
			mustWrite(t, db, pts...)
			mustFlush(t, db)
			if deep {
				mustCompact(t, db)
				if lv := db.Stats().SegmentsPerLevel; lv[2] != 1 || lv[0]+lv[1] != 0 {
					t.Fatalf("v1 is not alone in L2: segments per level %v", lv)
				}
			}
			check := func(when string) {
				t.Helper()
				for _, s := range mustQuery(t, db, rawAll("m")) {
					for _, x := range s.Samples {
						if x.Time == ts && x.Value.Str() != "v2" {
							t.Fatalf("%s: t reads %q, an overwritten value", when, x.Value.Str())
						}
					}
				}
			}
			mustWrite(t, db, pt("m", host, "v", String("v2"), ts))
			mustFlush(t, db)
			mustWrite(t, db, pt("m", host, "v", String("newer"), base+1))
			check("before the rule")
			short := []RetentionRule{{Measurement: "m", Keep: time.Minute}}
			if err := db.SetRetentionRules(short); err != nil {
				t.Fatal(err)
			}
			mustFlush(t, db)
			if n := len(mustQuery(t, db, rawAll("m"))[0].Samples); n != 2 {
				t.Fatalf("short rule shows %d samples, want 2", n)
			}
			mustCompact(t, db)
			if deep {
				if lv := db.Stats().SegmentsPerLevel; lv[1] != 1 || lv[2] != 1 {
					t.Fatalf("v2 did not merge into L1 above v1: segments per level %v", lv)
				}
			}
			check("compacted under the short rule")
			for _, keep := range []time.Duration{time.Hour, 0} {
				if err := db.SetRetentionRules([]RetentionRule{{Measurement: "m", Keep: keep}}); err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprint("lengthened to ", keep))
				mustCompact(t, db)
				check(fmt.Sprint("lengthened to ", keep, ", compacted"))
			}
			lo := *opts
			lo.RetentionRules = []RetentionRule{{Keep: 0}}
			db = reopen(t, db, dir, &lo)
			check("reopened, forever")
			got := samplesOf(t, mustQuery(t, db, rawAll("m")))
			if got[len(got)-1].Value.Str() != "newer" || got[len(got)-2].Value.Str() != "keep" {
				t.Fatalf("newer data lost: %v", got)
			}
		})
	}
}

// TestRetentionRulesConcurrent: rules change while writes, reads, flushes
// and compactions run (the race detector watches the rule caches). What
// no rule list ever expired is all there at the end, and nothing older
// than the final rules' cutoffs shows.
func TestRetentionRulesConcurrent(t *testing.T) {
	base := int64(1000 * hourNs)
	opts := quietOptions()
	opts.Now = func() time.Time { return time.Unix(0, base) }
	opts.MemTableBytes = 16 << 10
	opts.L0CompactionTrigger = 2
	db := openDB(t, t.TempDir(), opts)
	short := []RetentionRule{{Matchers: []Matcher{{Key: "host", Op: MatchRegexp, Value: "h[0-4]"}}, Keep: 2 * time.Hour}}
	long := []RetentionRule{{Measurement: "m", Keep: 4 * time.Hour}}
	const writers, perWriter = 2, 400
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				host := []Tag{{Key: "host", Value: fmt.Sprintf("h%d", (w*perWriter+i)%10)}}
				ts := base - int64(i)*int64(time.Minute) // 0 to 400 minutes old
				if err := db.Write([]Point{pt("m", host, "v", Float(float64(ts)), ts)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var side sync.WaitGroup
	side.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			rules := short
			if i%2 == 1 {
				rules = long
			}
			if err := db.SetRetentionRules(rules); err != nil {
				t.Error(err)
				return
			}
			if _, err := db.Query(ctx, rawAll("m")); err != nil {
				t.Error(err)
				return
			}
			if _, err := db.Last(ctx, Selector{}); err != nil {
				t.Error(err)
				return
			}
			if _, err := db.SeriesInfo(ctx, Selector{}); err != nil {
				t.Error(err)
				return
			}
			if err := db.Compact(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	side.Wait()
	if t.Failed() {
		return
	}
	if err := db.SetRetentionRules(long); err != nil {
		t.Fatal(err)
	}
	mustFlush(t, db)
	mustCompact(t, db)
	for _, s := range mustQuery(t, db, rawAll("m")) {
		n := 0
		for _, x := range s.Samples {
			if x.Time < base-4*hourNs || x.Value.Float() != float64(x.Time) {
				t.Fatalf("%s shows %v", seriesName(s), x)
			}
			if x.Time >= base-2*hourNs {
				n++
			}
		}
		// Host hk got the times i minutes old for i = k mod 10 (both
		// writers write the same ones); those at most 120 minutes old
		// were never expired.
		var k int
		fmt.Sscanf(s.Tags[0].Value, "h%d", &k)
		if want := (120-k)/10 + 1; n != want {
			t.Fatalf("%s keeps %d samples of the last two hours, want %d", seriesName(s), n, want)
		}
	}
	if got := len(mustQuery(t, db, rawAll("m"))); got != 10 {
		t.Fatalf("%d series, want 10", got)
	}
}
