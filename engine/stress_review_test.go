package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/point"
)

// The concurrent stress test: writers (Write and Appender), their own
// deletes, flushes, compactions (explicit and in the background),
// checkpoints, retention rules changed at run time and readers of every
// kind run at once. Each writer owns its series, and its own time range
// of series all writers share (created concurrently), so its operations
// form one history; a reader's answer about a writer's series must equal that
// history's state after some operation k, where k lies between the
// operations acknowledged before the read began and those begun when it
// ended, one k for every series of the writer that one read returns (so a
// half-applied batch or a delete seen in one series and not in another
// shows). Checkpoints must hold such a state of every writer, and a reopen
// every acknowledged operation, also after a Close that cut the run.
// Aggregates are checked against the model's, bit for bit. The existing
// TestConcurrentWritersReaders checks counts only, and the model tests
// (TestDifferential, TestCheckpointModel) run one writer.

const (
	stMeas    = "st"
	stShared  = "sh"   // series all writers write, each in its own time range
	stJunk    = "junk" // hidden by a retention rule now and then; never checked
	stTimeLo  = -20
	stTimeHi  = 160
	stTimeArg = stTimeHi - stTimeLo
)

var stFields = []struct {
	name string
	kind Kind
}{{"f", KindFloat}, {"i", KindInt}, {"s", KindString}, {"u", KindUint}}

// stHostNames are the values of tag h a writer may use.
// stSharedKeys are the values of tag k of the shared series: writers
// create them concurrently, through Write and appenders.
var stSharedKeys = []string{"x", "y", "z", "q0", "q1", "q2", "q3", "q4"}

// stSharedFields are the fields of the shared series.
var stSharedFields = []struct {
	name string
	kind Kind
}{{"v", KindFloat}, {"n", KindInt}}

var stHostNames = []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p"}

// stSeries names one series of a writer.
type stSeries struct {
	meas  string
	tags  []Tag // sorted
	field string
}

// stState is a writer's data after some operation: each series' samples,
// sorted by time. A state is never changed once published; the next one
// shares the slices of the series the operation did not touch.
type stState map[string][]Sample

// stWriter is one writer's history.
type stWriter struct {
	id      int
	tag     Tag
	hosts   []string
	series  map[string]stSeries // by key
	started atomic.Int64        // operations begun
	done    atomic.Int64        // operations acknowledged

	mu     sync.RWMutex
	states []stState // states[k]: after k operations
}

func newSTWriter(id, hosts int) *stWriter {
	w := &stWriter{id: id, tag: Tag{Key: "w", Value: fmt.Sprint(id)}, hosts: stHostNames[:hosts], series: map[string]stSeries{}}
	for _, h := range w.hosts {
		tags := []Tag{{Key: "h", Value: h}, w.tag}
		for _, f := range stFields {
			key := point.SeriesKey(stMeas, tags, f.name)
			w.series[key] = stSeries{meas: stMeas, tags: tags, field: f.name}
		}
	}
	for _, k := range stSharedKeys {
		tags := []Tag{{Key: "k", Value: k}}
		for _, f := range stSharedFields {
			key := point.SeriesKey(stShared, tags, f.name)
			w.series[key] = stSeries{meas: stShared, tags: tags, field: f.name}
		}
	}
	w.states = []stState{{}}
	return w
}

// base is where writer w's time range of the shared series starts.
func (w *stWriter) base() int64 { return int64(w.id+1) * 1_000_000 }

// sharedRange draws a range of w's part of the shared series.
func (w *stWriter) sharedRange(r *rand.Rand) (int64, int64) {
	lo, hi := stTimeRange(r)
	if lo == 0 && hi == 0 {
		lo, hi = stTimeLo-5, stTimeHi+5
	}
	return w.base() + lo, w.base() + hi
}

func (w *stWriter) key(h, field string) string {
	return point.SeriesKey(stMeas, []Tag{{Key: "h", Value: h}, w.tag}, field)
}

// publish makes next the state after the next operation, before that
// operation begins.
func (w *stWriter) publish(next stState) {
	w.mu.Lock()
	w.states = append(w.states, next)
	k := int64(len(w.states) - 1)
	w.mu.Unlock()
	w.started.Store(k)
}

func (w *stWriter) state(k int64) stState {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.states[k]
}

// stOp is one sample of a write, in the order the batch holds them.
type stOp struct {
	key string
	t   int64
	v   Value
}

// applyWrites returns s with ops applied in order (the last of a series
// and time wins).
func applyWrites(s stState, ops []stOp) stState {
	next := make(stState, len(s))
	for k, v := range s {
		next[k] = v
	}
	copied := map[string]bool{}
	for _, op := range ops {
		ss := next[op.key]
		if !copied[op.key] {
			ss = slices.Clone(ss)
			copied[op.key] = true
		}
		i, found := slices.BinarySearchFunc(ss, op.t, func(a Sample, t int64) int { return cmp.Compare(a.Time, t) })
		if found {
			ss[i].Value = op.v
		} else {
			ss = slices.Insert(ss, i, Sample{Time: op.t, Value: op.v})
		}
		next[op.key] = ss
	}
	return next
}

// applyDelete returns s with the samples of the keys in [lo, hi] removed.
func applyDelete(s stState, keys []string, lo, hi int64) stState {
	next := make(stState, len(s))
	for k, v := range s {
		next[k] = v
	}
	for _, key := range keys {
		next[key] = slices.DeleteFunc(slices.Clone(s[key]), func(smp Sample) bool { return smp.Time >= lo && smp.Time <= hi })
	}
	return next
}

// model returns a reference model holding state s of writer w.
func (w *stWriter) model(s stState) *RefModel {
	m := NewRefModel()
	var pts []Point
	for key, ss := range s {
		sr := w.series[key]
		for _, smp := range ss {
			pts = append(pts, Point{Measurement: sr.meas, Tags: sr.tags, Fields: []Field{{Key: sr.field, Value: smp.Value}}, Time: smp.Time})
		}
	}
	if err := m.Write(pts); err != nil {
		panic(err)
	}
	return m
}

// within reports "" when answer(model of state k) is "" for some k in
// [lo, hi], and otherwise what the answer was against the states at both
// ends.
func (w *stWriter) within(lo, hi int64, answer func(m *RefModel) string) string {
	var diffs []string
	for k := hi; k >= lo; k-- {
		d := answer(w.model(w.state(k)))
		if d == "" {
			return ""
		}
		if k == hi || k == lo {
			diffs = append(diffs, fmt.Sprintf("against state %d: %s", k, d))
		}
	}
	return fmt.Sprintf("writer %d: no state in [%d, %d] matches: %s", w.id, lo, hi, strings.Join(diffs, "; "))
}

// stValue draws a value of kind k: floats of few significant bits, so a
// sum of any order is exact, and strings that are sometimes empty.
func stValue(r *rand.Rand, k Kind) Value {
	switch k {
	case KindFloat:
		return Float(float64(r.IntN(4001)-2000) / 8)
	case KindInt:
		return Int(r.Int64N(1<<41) - 1<<40)
	case KindUint:
		return Uint(r.Uint64N(1 << 42))
	default:
		if r.IntN(10) == 0 {
			return String("")
		}
		return String(fmt.Sprintf("v%d", r.IntN(1000)))
	}
}

// stBatch draws a batch of samples of writer w.
func (w *stWriter) batch(r *rand.Rand) []stOp {
	n := 1 + r.IntN(24)
	ops := make([]stOp, 0, n)
	for range n {
		if r.IntN(4) == 0 {
			k := stSharedKeys[r.IntN(len(stSharedKeys))]
			f := stSharedFields[r.IntN(len(stSharedFields))]
			key := point.SeriesKey(stShared, []Tag{{Key: "k", Value: k}}, f.name)
			ops = append(ops, stOp{key: key, t: w.base() + int64(stTimeLo+r.IntN(stTimeArg)), v: stValue(r, f.kind)})
			continue
		}
		h := w.hosts[r.IntN(len(w.hosts))]
		f := stFields[r.IntN(len(stFields))]
		ops = append(ops, stOp{key: w.key(h, f.name), t: int64(stTimeLo + r.IntN(stTimeArg)), v: stValue(r, f.kind)})
	}
	return ops
}

// stTimeRange draws [lo, hi) over the writers' times, or all time.
func stTimeRange(r *rand.Rand) (int64, int64) {
	if r.IntN(4) == 0 {
		return 0, 0
	}
	lo := int64(stTimeLo - 5 + r.IntN(stTimeArg+5))
	return lo, lo + 1 + int64(r.IntN(stTimeArg))
}

func stOptions(sync SyncMode) *Options {
	return &Options{
		Logger:              slog.New(slog.DiscardHandler),
		Sync:                sync,
		MemTableBytes:       6 << 10,
		BlockSamples:        8,
		L0CompactionTrigger: 2,
		TargetSegmentBytes:  6 << 10,
		L1TargetBytes:       24 << 10,
		WALSegmentBytes:     8 << 10,
		// The data lies far below now: a rule hides junk, none hides st.
		Now: func() time.Time { return time.Unix(0, 1<<40) },
	}
}

// stRules are the retention rules the test switches between: each keeps
// st and sh forever.
var stRules = [][]RetentionRule{
	nil,
	{{Measurement: stJunk, Keep: time.Nanosecond}},
	{{Measurement: stMeas, Keep: 0}, {Measurement: stShared, Keep: 0}, {Keep: time.Nanosecond}},
	{{Measurement: stJunk, Matchers: []Matcher{{Key: "w", Op: MatchRegexp, Value: "[02]"}}, Keep: time.Hour}},
}

// stConfig is the shape of one stress run.
type stConfig struct {
	seed             uint64
	opts             *Options
	writers, readers int
	hosts            int // values of tag h per writer: 4 series each
	ops              int // per writer
	// small reads long series in parts of a few samples and reads ahead
	// (QuerySeq, Last) on several goroutines from a few series on.
	small bool
	// closeAt > 0 closes the DB once writer 0 has done that many
	// operations, while everything runs: every call then in flight must
	// end, with ErrClosed or nil, and the reopened DB must hold every
	// acknowledged operation.
	closeAt int
}

// TestStressConcurrentModel runs the stress workload in both sync modes,
// and once with many series and small parts, so that reads take their
// parallel paths.
func TestStressConcurrentModel(t *testing.T) {
	ops := 220
	if raceEnabled {
		ops = 120
	}
	for _, mode := range []SyncMode{SyncNever, SyncAlways} {
		t.Run(mode.String(), func(t *testing.T) {
			runStress(t, stConfig{seed: uint64(mode) + 7, opts: stOptions(mode), writers: 4, readers: 3, hosts: 3, ops: ops})
		})
	}
	t.Run("wide", func(t *testing.T) {
		runStress(t, stConfig{seed: 5, opts: stOptions(SyncNever), writers: 5, readers: 3, hosts: 16, ops: ops / 2, small: true})
	})
	for _, mode := range []SyncMode{SyncNever, SyncAlways} {
		t.Run("close-"+mode.String(), func(t *testing.T) {
			runStress(t, stConfig{seed: uint64(mode) + 17, opts: stOptions(mode), writers: 4, readers: 3, hosts: 3, ops: ops, closeAt: ops / 2})
		})
	}
}

type stCheckpoint struct {
	dir    string
	lo, hi []int64
	info   CheckpointInfo
}

func runStress(t *testing.T, cfg stConfig) {
	seed, opts, ops := cfg.seed, cfg.opts, cfg.ops
	dir := t.TempDir()
	db := openDB(t, dir, opts)
	if cfg.small {
		smallParts(db)
		db.seqParallelMin = 4
	}
	ctx := context.Background()
	ws := make([]*stWriter, cfg.writers)
	for i := range ws {
		ws[i] = newSTWriter(i, cfg.hosts)
	}

	var writing, others sync.WaitGroup
	var stop, closing atomic.Bool
	failed := make(chan struct{})
	var failOnce sync.Once
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
		stop.Store(true)
		failOnce.Do(func() { close(failed) })
	}
	// closed reports whether err is what a call cut by the Close of a
	// closeAt run returns: the caller then stops.
	closed := func(err error) bool { return closing.Load() && errors.Is(err, ErrClosed) }

	reached := make(chan struct{})
	for _, w := range ws {
		writing.Go(func() {
			c := newSTClient(db, w, seed)
			for i := 0; i < ops && !stop.Load(); i++ {
				if i == cfg.closeAt && w.id == 0 {
					close(reached)
				}
				if err := c.step(); err != nil {
					if !closed(err) {
						fail("writer %d op %d: %v", w.id, i, err)
					}
					return
				}
			}
		})
	}
	if cfg.closeAt > 0 {
		others.Go(func() {
			select {
			case <-reached:
			case <-failed:
				return
			}
			closing.Store(true)
			if err := db.Close(); err != nil {
				fail("close while busy: %v", err)
			}
			stop.Store(true)
		})
	}

	var reads atomic.Int64
	for rd := range cfg.readers {
		others.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(100+rd)))
			for !stop.Load() {
				if d, err := stressRead(ctx, db, ws, r); err != nil || d != "" {
					if !closed(err) {
						fail("reader %d: %s", rd, d)
					}
					return
				}
				reads.Add(1)
			}
		})
	}

	var cps []stCheckpoint
	var maint atomic.Int64
	others.Go(func() {
		r := rand.New(rand.NewPCG(seed, 200))
		for i := 0; !stop.Load(); i++ {
			var err error
			switch x := r.IntN(10); {
			case x < 3:
				err = db.Flush()
			case x < 5:
				err = db.Compact()
			case x < 7:
				err = db.SetRetentionRules(stRules[r.IntN(len(stRules))])
			default:
				if len(cps) >= 8 {
					runtime.Gosched()
					continue
				}
				cp := stCheckpoint{dir: filepath.Join(t.TempDir(), fmt.Sprint("cp", i))}
				for _, w := range ws {
					cp.lo = append(cp.lo, w.done.Load())
				}
				cp.info, err = db.Checkpoint(ctx, cp.dir)
				for _, w := range ws {
					cp.hi = append(cp.hi, w.started.Load())
				}
				if err == nil {
					cps = append(cps, cp)
				}
			}
			if err != nil {
				if !closed(err) {
					fail("maintenance step %d: %v", i, err)
				}
				return
			}
			maint.Add(1)
		}
	})

	writing.Wait()
	stop.Store(true)
	others.Wait()
	if t.Failed() {
		return
	}
	if cfg.closeAt > 0 {
		// Every acknowledged operation is there, and of the one each
		// writer had in flight, all or nothing.
		db = openDB(t, dir, opts)
		for _, w := range ws {
			if d := checkFull(db, w, w.done.Load(), w.started.Load()); d != "" {
				t.Fatalf("reopened after a Close cut the run: %s", d)
			}
		}
		// Settle the writers' states for the checks below.
		for _, w := range ws {
			if n := w.started.Load(); w.done.Load() != n {
				if d := checkFull(db, w, n, n); d == "" {
					w.done.Store(n)
				} else {
					w.mu.Lock()
					w.states = w.states[:n]
					w.mu.Unlock()
					w.started.Store(n - 1)
				}
			}
		}
	} else {
		for _, w := range ws {
			if w.done.Load() != int64(ops) {
				t.Fatalf("writer %d acknowledged %d of %d operations", w.id, w.done.Load(), ops)
			}
		}
	}

	// Every checkpoint holds, for each writer, a state of its window.
	for i, cp := range cps {
		cdb, err := Open(cp.dir, &Options{Logger: opts.Logger, ReadOnly: true})
		if err != nil {
			t.Fatalf("checkpoint %d: open: %v", i, err)
		}
		for j, w := range ws {
			// An operation a Close cut and that did not land is in no
			// checkpoint either.
			if d := checkFull(cdb, w, cp.lo[j], min(cp.hi[j], w.started.Load())); d != "" {
				t.Errorf("checkpoint %d (seq %d): %s", i, cp.info.Seq, d)
			}
		}
		if _, err := cdb.Verify(ctx); err != nil {
			t.Errorf("checkpoint %d: verify: %v", i, err)
		}
		cdb.Close()
	}

	final := func(where string) {
		t.Helper()
		for _, w := range ws {
			if d := checkFull(db, w, w.done.Load(), w.done.Load()); d != "" {
				t.Fatalf("%s: %s", where, d)
			}
		}
	}
	final("after the run")
	st := db.Stats()
	if cfg.closeAt == 0 && (st.Flushes == 0 || st.Compactions == 0) {
		t.Errorf("workload too narrow: %d flushes, %d compactions", st.Flushes, st.Compactions)
	}
	mustCompact(t, db)
	final("after compact")
	db = reopen(t, db, dir, opts)
	final("after reopen")
	if _, err := db.Verify(ctx); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if reads.Load() == 0 || len(cps) == 0 {
		t.Fatalf("workload too narrow: %d reads, %d checkpoints", reads.Load(), len(cps))
	}
	t.Logf("%d reads, %d maintenance steps, %d checkpoints; %d flushes, %d compactions since the last open",
		reads.Load(), maint.Load(), len(cps), st.Flushes, st.Compactions)
}

// checkFull compares everything db holds of w with w's states in [lo, hi].
func checkFull(db *DB, w *stWriter, lo, hi int64) string {
	q := Query{Selector: Selector{Measurement: stMeas, Tags: []Tag{w.tag}}}
	got, err := db.Query(context.Background(), q)
	if err != nil {
		return err.Error()
	}
	sq := Query{Selector: Selector{Measurement: stShared, Start: w.base() + stTimeLo, End: w.base() + stTimeHi}}
	shared, err := db.Query(context.Background(), sq)
	if err != nil {
		return err.Error()
	}
	return w.within(lo, hi, func(m *RefModel) string {
		if d := diffResults(AggNone, got, m.Query(q)); d != "" {
			return d
		}
		return diffResults(AggNone, shared, m.Query(sq))
	})
}

// stClient runs the operations of one writer.
type stClient struct {
	db   *DB
	w    *stWriter
	r    *rand.Rand
	app  *Appender
	refs map[string]SeriesRef
}

func newSTClient(db *DB, w *stWriter, seed uint64) *stClient {
	return &stClient{db: db, w: w, r: rand.New(rand.NewPCG(seed, uint64(w.id))), app: db.Appender(), refs: map[string]SeriesRef{}}
}

// step runs the writer's next operation: the state it leads to is
// published first, its acknowledgement counted after.
func (c *stClient) step() error {
	w, r := c.w, c.r
	i := w.done.Load()
	cur := w.state(i)
	switch x := r.IntN(100); {
	case x < 40: // Write, one point per sample, sometimes with junk
		batch := w.batch(r)
		pts := make([]Point, 0, len(batch)+1)
		for _, op := range batch {
			sr := w.series[op.key]
			tags := slices.Clone(sr.tags)
			slices.Reverse(tags) // any order
			pts = append(pts, Point{Measurement: sr.meas, Tags: tags, Fields: []Field{{Key: sr.field, Value: op.v}}, Time: op.t})
		}
		if r.IntN(3) == 0 {
			pts = append(pts, pt(stJunk, []Tag{w.tag}, "v", Float(1), int64(r.IntN(100))))
		}
		w.publish(applyWrites(cur, batch))
		if err := c.db.Write(pts); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	case x < 75: // Appender
		batch := w.batch(r)
		if r.IntN(8) == 0 {
			// A rolled-back batch changes nothing.
			for _, op := range batch {
				sr := w.series[op.key]
				if _, err := c.app.Append(0, sr.meas, sr.tags, sr.field, op.t, op.v); err != nil {
					return fmt.Errorf("append: %w", err)
				}
			}
			if err := c.app.Rollback(); err != nil {
				return fmt.Errorf("rollback: %w", err)
			}
		}
		for _, op := range batch {
			sr := w.series[op.key]
			ref, err := c.app.Append(c.refs[op.key], sr.meas, sr.tags, sr.field, op.t, op.v)
			if err != nil {
				return fmt.Errorf("append: %w", err)
			}
			c.refs[op.key] = ref
		}
		w.publish(applyWrites(cur, batch))
		if err := c.app.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
	case x < 85: // Delete of a range of w's part of the shared series
		sel := Selector{Measurement: stShared}
		sel.Start, sel.End = w.sharedRange(r)
		if r.IntN(2) == 0 {
			sel.Field = stSharedFields[r.IntN(len(stSharedFields))].name
		}
		if r.IntN(2) == 0 {
			sel.Matchers = []Matcher{{Key: "k", Op: MatchNotEqual, Value: stSharedKeys[r.IntN(len(stSharedKeys))]}}
		}
		var keys []string
		for key, sr := range w.series {
			if sr.meas == stShared && (sel.Field == "" || sr.field == sel.Field) && (sel.Matchers == nil || sr.tags[0].Value != sel.Matchers[0].Value) {
				keys = append(keys, key)
			}
		}
		lo, hi := sel.TimeRange()
		w.publish(applyDelete(cur, keys, lo, hi))
		if err := c.db.Delete(context.Background(), sel); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
	default: // Delete of a range of some of the writer's series
		sel := Selector{Measurement: stMeas, Tags: []Tag{w.tag}}
		sel.Start, sel.End = stTimeRange(r)
		if r.IntN(2) == 0 {
			sel.Field = stFields[r.IntN(len(stFields))].name
		}
		if r.IntN(2) == 0 {
			sel.Matchers = []Matcher{{Key: "h", Op: MatchNotEqual, Value: w.hosts[r.IntN(len(w.hosts))]}}
		}
		var keys []string
		for key, sr := range w.series {
			if sr.meas == stMeas && (sel.Field == "" || sr.field == sel.Field) && (sel.Matchers == nil || sr.tags[0].Value != sel.Matchers[0].Value) {
				keys = append(keys, key)
			}
		}
		lo, hi := sel.TimeRange()
		w.publish(applyDelete(cur, keys, lo, hi))
		if err := c.db.Delete(context.Background(), sel); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
	}
	w.done.Store(i + 1)
	return nil
}

var stAggs = []Aggregate{AggCount, AggSum, AggMean, AggMin, AggMax, AggFirst, AggLast}

// stressRead runs one random read and checks it against the writers'
// windows; it returns what went wrong, or "".
func stressRead(ctx context.Context, db *DB, ws []*stWriter, r *rand.Rand) (string, error) {
	w := ws[r.IntN(len(ws))]
	sel := Selector{Measurement: stMeas, Tags: []Tag{w.tag}}
	sel.Start, sel.End = stTimeRange(r)
	if r.IntN(3) == 0 {
		sel.Field = stFields[r.IntN(len(stFields))].name
	}
	if r.IntN(4) == 0 {
		sel.Matchers = []Matcher{{Key: "h", Op: MatchRegexp, Value: "[ab]"}}
	}
	x := r.IntN(9)
	shared := r.IntN(4) == 0
	group := []string{"w"}
	if shared {
		// w's part of the shared series: its time range.
		sel = Selector{Measurement: stShared}
		sel.Start, sel.End = w.sharedRange(r)
		if r.IntN(3) == 0 {
			sel.Field = stSharedFields[r.IntN(len(stSharedFields))].name
		}
		if r.IntN(4) == 0 {
			sel.Matchers = []Matcher{{Key: "k", Op: MatchRegexp, Value: "q.*"}}
		}
		group = []string{}
		x %= 7
	}
	q := Query{Selector: sel}
	if r.IntN(2) == 0 {
		q.Agg = stAggs[r.IntN(len(stAggs))]
		q.Every = []int64{0, 0, 1, 7, 64}[r.IntN(5)]
	}
	lo := w.done.Load()
	var (
		what   string
		answer func(m *RefModel) string
	)
	switch x {
	case 0, 1: // Query
		what = "query " + formatQuery(q)
		got, err := db.Query(ctx, q)
		if err != nil {
			return what + ": " + err.Error(), err
		}
		answer = func(m *RefModel) string { return diffResults(q.Agg, got, m.Query(q)) }
	case 2: // grouped per writer
		if q.Agg == AggNone {
			q.Agg = AggSum
		}
		q.GroupBy = group
		what = "query " + formatQuery(q)
		got, err := db.Query(ctx, q)
		if err != nil {
			return what + ": " + err.Error(), err
		}
		answer = func(m *RefModel) string { return diffResults(q.Agg, got, m.Query(q)) }
	case 3: // QuerySeq, taking its time between results
		what = "QuerySeq " + formatQuery(q)
		var got []Series
		for s, err := range db.QuerySeq(ctx, q) {
			if err != nil {
				return what + ": " + err.Error(), err
			}
			// Parts of a series continue it.
			if n := len(got); n > 0 && point.SeriesKey(s.Measurement, s.Tags, s.Field) == point.SeriesKey(got[n-1].Measurement, got[n-1].Tags, got[n-1].Field) {
				got[n-1].Samples = append(got[n-1].Samples, s.Samples...)
			} else {
				got = append(got, s)
			}
			runtime.Gosched()
		}
		answer = func(m *RefModel) string { return diffResults(q.Agg, got, m.Query(q)) }
	case 4: // Scan
		q.Agg, q.Every = AggNone, 0
		what = "Scan " + formatQuery(q)
		got, err := joinScan(db, sel)
		if err != nil {
			return what + ": " + err.Error(), err
		}
		answer = func(m *RefModel) string { return diffResults(AggNone, got, m.Query(q)) }
	case 5: // Last
		what = "Last " + formatQuery(q)
		got, err := db.Last(ctx, sel)
		if err != nil {
			return what + ": " + err.Error(), err
		}
		answer = func(m *RefModel) string { return diffResults(AggLast, got, m.Last(sel)) }
	case 6: // SeriesInfo
		what = "SeriesInfo " + formatQuery(q)
		got, err := db.SeriesInfo(ctx, sel)
		if err != nil {
			return what + ": " + err.Error(), err
		}
		answer = func(m *RefModel) string {
			if want := m.SeriesInfo(sel); !slices.EqualFunc(got, want, sameInfo) {
				return fmt.Sprintf("got %v, want %v", got, want)
			}
			return ""
		}
	default: // every writer at once, each checked against its own window
		q.Tags = nil
		los := make([]int64, len(ws))
		for i, w := range ws {
			los[i] = w.done.Load()
		}
		what = "query of all writers " + formatQuery(q)
		got, err := db.Query(ctx, q)
		if err != nil {
			return what + ": " + err.Error(), err
		}
		for i, w := range ws {
			hi := w.started.Load()
			var mine []Series
			for _, s := range got {
				if slices.Contains(s.Tags, w.tag) {
					mine = append(mine, s)
				}
			}
			wq := q
			wq.Tags = []Tag{w.tag}
			if d := w.within(los[i], hi, func(m *RefModel) string { return diffResults(q.Agg, mine, m.Query(wq)) }); d != "" {
				return what + ": " + d, nil
			}
		}
		return "", nil
	}
	hi := w.started.Load()
	if d := w.within(lo, hi, answer); d != "" {
		return what + ": " + d, nil
	}
	return "", nil
}

func sameInfo(a, b SeriesInfo) bool {
	return a.Measurement == b.Measurement && a.Field == b.Field && a.Kind == b.Kind && slices.Equal(a.Tags, b.Tags)
}
