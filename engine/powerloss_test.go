package engine

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/vfs"
)

// The power-loss tests run a random workload on a vfs.MemFS and, at random
// moments between two operations while the DB runs (a background flush or
// compaction may be half done), take the filesystem a power loss would
// leave: MemFS.CrashClone keeps only synced bytes and synced directory
// entries, CrashCloneRandom also keeps a random part of what was not
// synced, and MemFS.Clone keeps everything, as a process crash (kill -9)
// does. A DB opened on the clone must open (never ErrCorrupt) and show:
//
//   - after a process crash in any mode, and after a power loss under
//     SyncAlways, exactly the acknowledged operations: every Write and
//     Delete that returned before the clone;
//   - after a power loss under SyncInterval and SyncNever, the state after
//     some prefix of them (see plPrefix).
//
// A second power loss right after recovery must show the same state again,
// and the recovered DB must pass Verify and take a write and a flush.

const powerLossDir = "/db"

var (
	plMeasurements = []string{"pl", "pm"}
	plHosts        = []string{"a", "b", "c"}
)

// plOp is one operation of the power-loss workload.
type plOp struct {
	write   []Point   // a Write
	del     *Selector // a Delete
	flush   bool
	compact bool
}

func (op plOp) String() string {
	switch {
	case op.write != nil:
		return fmt.Sprintf("write of %d points (marker %d)", len(op.write), op.write[0].Fields[0].Value.Int())
	case op.del != nil:
		return fmt.Sprintf("delete %s tags=%v [%d,%d)", op.del.Measurement, op.del.Tags, op.del.Start, op.del.End)
	case op.flush:
		return "flush"
	}
	return "compact"
}

// plWorkload returns n random operations over a few series with frequent
// overwrites. Every point of the i-th Write carries the marker field "w"
// with value i+1, so a recovered sample tells which Write it came from.
func plWorkload(r *rand.Rand, n int) []plOp {
	ops := make([]plOp, 0, n)
	writes := 0
	for range n {
		switch x := r.IntN(100); {
		case x < 78:
			writes++
			pts := make([]Point, 1+r.IntN(8))
			for i := range pts {
				p := Point{
					Measurement: plMeasurements[r.IntN(len(plMeasurements))],
					Tags:        []Tag{{Key: "host", Value: plHosts[r.IntN(len(plHosts))]}},
					Time:        r.Int64N(150) * 10,
				}
				p.Fields = append(p.Fields, Field{Key: "w", Value: Int(int64(writes))})
				p.Fields = append(p.Fields, Field{Key: "v", Value: Float(float64(r.IntN(10000)) / 100)})
				if r.IntN(2) == 0 {
					p.Fields = append(p.Fields, Field{Key: "n", Value: Int(r.Int64N(1000))})
				}
				pts[i] = p
			}
			ops = append(ops, plOp{write: pts})
		case x < 90:
			sel := Selector{Measurement: plMeasurements[r.IntN(len(plMeasurements))]}
			if r.IntN(2) == 0 {
				sel.Tags = []Tag{{Key: "host", Value: plHosts[r.IntN(len(plHosts))]}}
			}
			if r.IntN(3) == 0 {
				sel.Field = []string{"w", "v", "n"}[r.IntN(3)]
			}
			sel.Start = r.Int64N(150) * 10
			sel.End = sel.Start + 1 + r.Int64N(400)
			ops = append(ops, plOp{del: &sel})
		case x < 96:
			ops = append(ops, plOp{flush: true})
		default:
			ops = append(ops, plOp{compact: true})
		}
	}
	return ops
}

// apply applies op to m.
func (op plOp) apply(m *RefModel) {
	switch {
	case op.write != nil:
		m.write(op.write)
	case op.del != nil:
		m.delete(*op.del)
	}
}

// plConfig is one configuration of the power-loss test.
type plConfig struct {
	sync SyncMode
	// noBackgroundCompaction leaves compaction to the workload's Compact
	// calls, so tombstones stay unapplied longer and recovery replays them.
	noBackgroundCompaction bool
}

func (cfg plConfig) options(fs vfs.FS) *Options {
	opts := &Options{
		Logger:                      slog.New(slog.DiscardHandler),
		Sync:                        cfg.sync,
		SyncInterval:                time.Millisecond, // for SyncInterval: fsyncs land between operations
		MemTableBytes:               16 << 10,
		WALSegmentBytes:             8 << 10,
		L0CompactionTrigger:         2,
		BlockSamples:                16,
		TargetSegmentBytes:          4 << 10,
		DisableBackgroundCompaction: cfg.noBackgroundCompaction,
	}
	opts.fs = fs
	return opts
}

// plCrash is the filesystem a crash left after ops[:step] were
// acknowledged.
type plCrash struct {
	step    int
	fs      *vfs.MemFS
	how     string
	process bool // a process crash (kill -9): the OS kept every write
}

// runPowerLossWorkload runs ops on a DB on a fresh MemFS and takes crash
// clones at random steps (and after the last one) while the DB runs.
func runPowerLossWorkload(t *testing.T, cfg plConfig, ops []plOp, r *rand.Rand, crashEvery int) []plCrash {
	t.Helper()
	mem := vfs.NewMem()
	db, err := Open(powerLossDir, cfg.options(mem))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	var crashes []plCrash
	m := NewRefModel()
	crash := func(step int) {
		// The live DB shows what was acknowledged: the model is right.
		state, err := plState(db)
		if err != nil {
			t.Fatal(err)
		}
		if d := plDiff(state, m); d != "" {
			t.Fatalf("live DB after %d operations: %s", step, d)
		}
		crashes = append(crashes,
			plCrash{step: step, fs: mem.CrashClone(), how: "power loss"},
			plCrash{step: step, fs: mem.CrashCloneRandom(r), how: "power loss with partial writeback"},
			plCrash{step: step, fs: mem.Clone(), how: "process crash", process: true})
	}
	ctx := context.Background()
	for i, op := range ops {
		if r.IntN(crashEvery) == 0 {
			crash(i)
		}
		switch {
		case op.write != nil:
			err = db.Write(op.write)
		case op.del != nil:
			err = db.Delete(ctx, *op.del)
		case op.flush:
			err = db.Flush()
		default:
			err = db.Compact()
		}
		if err != nil {
			t.Fatalf("op %d (%v): %v", i, op, err)
		}
		op.apply(m)
	}
	crash(len(ops))
	return crashes
}

// plState reads every sample of the power-loss measurements.
func plState(db *DB) (map[string][]Series, error) {
	state := make(map[string][]Series)
	for _, meas := range plMeasurements {
		res, err := db.Query(context.Background(), rawAll(meas))
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", meas, err)
		}
		state[meas] = res
	}
	return state, nil
}

// plDiff describes how state differs from m, or returns "".
func plDiff(state map[string][]Series, m *RefModel) string {
	for _, meas := range plMeasurements {
		if d := diffResults(AggNone, state[meas], m.query(rawAll(meas), minTime)); d != "" {
			return meas + ": " + d
		}
	}
	return ""
}

// plStateDiff describes how b differs from a, or returns "".
func plStateDiff(a, b map[string][]Series) string {
	for _, meas := range plMeasurements {
		if d := diffResults(AggNone, b[meas], a[meas]); d != "" {
			return meas + ": " + d
		}
	}
	return ""
}

// plPrefix returns the k <= step for which state is the one after
// ops[:k], or -1. Under SyncNever a power loss may lose any suffix of the
// acknowledged operations, but what it keeps must be a prefix: nothing
// that was never written, no Write half visible, no Delete applied to some
// of what it covers but not the rest, no Delete kept while a Write before
// it is lost.
func plPrefix(ops []plOp, step int, state map[string][]Series) int {
	// The Write with the newest visible marker, and all before it, are in.
	lo := 0
	if newest := plNewestMarker(state); newest > 0 {
		for lo < step && (ops[lo].write == nil || ops[lo].write[0].Fields[0].Value.Int() != newest) {
			lo++
		}
		lo++
	}
	m := NewRefModel()
	for _, op := range ops[:min(lo, step)] {
		op.apply(m)
	}
	for k := lo; k <= step; k++ {
		if k > lo {
			op := ops[k-1]
			if op.write != nil && !plHidden(ops, k-1, step) {
				break // this Write would show its marker
			}
			op.apply(m)
			if op.write == nil && op.del == nil {
				continue
			}
		}
		if plDiff(state, m) == "" {
			return k
		}
	}
	return -1
}

// plHidden reports whether the marker of every point of the Write ops[i]
// may be invisible after ops[:step]: a later Delete covers it or a later
// Write overwrites it.
func plHidden(ops []plOp, i, step int) bool {
	for _, p := range ops[i].write {
		hidden := false
		for _, op := range ops[i+1 : step] {
			switch {
			case op.write != nil:
				for _, q := range op.write {
					hidden = hidden || (q.Measurement == p.Measurement && q.Tags[0] == p.Tags[0] && q.Time == p.Time)
				}
			case op.del != nil:
				d := op.del
				hidden = hidden || (d.Measurement == p.Measurement && (d.Field == "" || d.Field == "w") &&
					(len(d.Tags) == 0 || d.Tags[0] == p.Tags[0]) && d.Start <= p.Time && p.Time < d.End)
			}
		}
		if !hidden {
			return false
		}
	}
	return true
}

// plNewestMarker returns the largest marker visible in state, or 0.
func plNewestMarker(state map[string][]Series) int64 {
	var newest int64
	for _, res := range state {
		for _, s := range res {
			if s.Field != "w" {
				continue
			}
			for _, smp := range s.Samples {
				newest = max(newest, smp.Value.Int())
			}
		}
	}
	return newest
}

// describeNoPrefix compares a state that matches no prefix with the
// prefix that ends at the newest Write it shows.
func describeNoPrefix(ops []plOp, step int, state map[string][]Series) string {
	newest := plNewestMarker(state)
	m := NewRefModel()
	k := 0
	for ; k < step && newest > 0; k++ {
		ops[k].apply(m)
		if ops[k].write != nil && ops[k].write[0].Fields[0].Value.Int() == newest {
			k++
			break
		}
	}
	return fmt.Sprintf("matches no prefix of the %d acknowledged operations; newest visible Write has marker %d; against ops[:%d]: %s",
		step, newest, k, plDiff(state, m))
}

// listFiles describes every file of fs, for failure reports.
func listFiles(fs vfs.FS, dir string) string {
	var b strings.Builder
	var walk func(dir string)
	walk = func(dir string) {
		names, err := fs.ReadDir(dir)
		if err != nil {
			fmt.Fprintf(&b, " %s:%v", dir, err)
			return
		}
		for _, n := range names {
			p := path.Join(dir, n)
			fi, err := fs.Stat(p)
			switch {
			case err != nil:
				fmt.Fprintf(&b, " %s:%v", p, err)
			case fi.IsDir():
				walk(p)
			default:
				fmt.Fprintf(&b, " %s(%d)", p, fi.Size())
			}
		}
	}
	walk(dir)
	return b.String()
}

// checkPowerLoss opens the DB a crash left and checks its state; then it
// crashes again right after recovery and checks that the state stays. It
// returns a description of the first problem, or "".
func checkPowerLoss(cfg plConfig, ops []plOp, c plCrash) (problem string) {
	files := listFiles(c.fs, "/")
	db, err := Open(powerLossDir, cfg.options(c.fs))
	if err != nil {
		return fmt.Sprintf("open: %v (files:%s)", err, files)
	}
	state, err := plState(db)
	if err != nil {
		db.Close()
		return err.Error()
	}
	if cfg.sync == SyncAlways || c.process {
		m := NewRefModel()
		for _, op := range ops[:c.step] {
			op.apply(m)
		}
		if d := plDiff(state, m); d != "" {
			problem = fmt.Sprintf("acknowledged operations lost: %s (files:%s)", d, files)
		}
	} else if plPrefix(ops, c.step, state) < 0 {
		problem = describeNoPrefix(ops, c.step, state) + " (files:" + files + ")"
	}
	if problem == "" {
		if _, err := db.Verify(context.Background()); err != nil {
			problem = fmt.Sprintf("verify after recovery: %v", err)
		}
	}
	// A second power loss right after recovery.
	again := c.fs.CrashClone()
	if err := db.Close(); err != nil && problem == "" {
		problem = fmt.Sprintf("close after recovery: %v", err)
	}
	if problem != "" {
		return problem
	}
	db2, err := Open(powerLossDir, cfg.options(again))
	if err != nil {
		return fmt.Sprintf("open after a crash right after recovery: %v (files:%s)", err, listFiles(again, "/"))
	}
	defer db2.Close()
	state2, err := plState(db2)
	switch {
	case err != nil:
		problem = "after a crash right after recovery: " + err.Error()
	case plStateDiff(state, state2) != "":
		problem = "a crash right after recovery changed the data: " + plStateDiff(state, state2)
	default:
		// The recovered database takes writes.
		if err := db2.Write([]Point{pt("after", nil, "v", Int(1), 1)}); err != nil {
			problem = fmt.Sprintf("write after recovery: %v", err)
		} else if err := db2.Flush(); err != nil {
			problem = fmt.Sprintf("flush after recovery: %v", err)
		}
	}
	return problem
}

func TestPowerLoss(t *testing.T) {
	seeds, steps, crashEvery := 6, 300, 12
	if raceEnabled {
		seeds, steps = 3, 200
	}
	for _, mode := range []struct {
		name string
		sync SyncMode
	}{{"SyncAlways", SyncAlways}, {"SyncInterval", SyncInterval}, {"SyncNever", SyncNever}} {
		t.Run(mode.name, func(t *testing.T) {
			failures, checked := 0, 0
			for seed := range uint64(seeds) {
				r := rand.New(rand.NewPCG(seed, 0x9e3779b9))
				ops := plWorkload(r, steps)
				cfg := plConfig{sync: mode.sync, noBackgroundCompaction: seed%2 == 1}
				crashes := runPowerLossWorkload(t, cfg, ops, r, crashEvery)
				for _, c := range crashes {
					checked++
					if p := checkPowerLoss(cfg, ops, c); p != "" {
						t.Errorf("seed %d, %s after %d operations: %s", seed, c.how, c.step, p)
						if failures++; failures >= 5 {
							t.Fatal("stopping after 5 failures")
						}
					}
				}
			}
			t.Logf("%d crash states checked", checked)
		})
	}
}
