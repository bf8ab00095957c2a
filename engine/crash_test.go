package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/internal/vfs"
)

// The crash-injection tests fail the i-th filesystem operation, and every
// one after it (as a dying disk or a crash would), for i = 0, 1, 2, ...
// until a run finishes without reaching the fault. After each failed run
// the directory is reopened without faults: every acknowledged write and
// delete must be there, and the operation that failed must be all there
// or not at all.

// faultLoopWorkers runs that many fault points at once: the runs wait on
// fsyncs far more than they compute.
const faultLoopWorkers = 4

// maxFaultFailures stops a fault loop after that many failing points.
const maxFaultFailures = 5

// faultLoop calls run(i) for i = 0, 1, 2, ... in parallel batches until a
// run reports that it never reached its fault, and returns that i. run
// returns a description of what went wrong, or "".
func faultLoop(t *testing.T, run func(i int64) (reached bool, problem string)) int64 {
	var failures int
	for base := int64(0); ; base += faultLoopWorkers {
		reached := make([]bool, faultLoopWorkers)
		problems := make([]string, faultLoopWorkers)
		var wg sync.WaitGroup
		for j := range int64(faultLoopWorkers) {
			wg.Go(func() { reached[j], problems[j] = run(base + j) })
		}
		wg.Wait()
		for j := range faultLoopWorkers {
			if problems[j] != "" {
				t.Errorf("fault at op %d: %s", base+int64(j), problems[j])
				failures++
			}
		}
		for j := range faultLoopWorkers {
			if !reached[j] {
				return base + int64(j)
			}
		}
		if failures >= maxFaultFailures {
			t.Fatalf("stopping after %d failing fault points", failures)
		}
	}
}

// faultOp reports whether op changes the filesystem.
func faultOp(op vfs.Op) bool {
	switch op {
	case vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpRename, vfs.OpSyncDir:
		return true
	}
	return false
}

// faultStep is one operation of the workload.
type faultStep struct {
	name  string
	write []Point   // a Write
	del   *Selector // a Delete
	flush bool
	comp  bool
	seal  bool // seal the active memtable without waiting for its flush
}

func faultWorkload() []faultStep {
	batch := faultBatches(5)
	sel := Selector{Measurement: "cpu", Start: -100_000, End: 100_000}
	return []faultStep{
		{name: "write 0", write: batch()},
		{name: "write 1", write: batch()},
		{name: "flush 1", flush: true},
		{name: "write 2", write: batch()},
		{name: "delete", del: &sel},
		{name: "flush 2", flush: true},
		{name: "write 3", write: batch()},
		{name: "compact", comp: true},
		{name: "write 4", write: batch()},
	}
}

// faultBatches returns a generator of batches of 8 points from seed. Kinds
// are always the home kinds: every Write can succeed.
func faultBatches(seed uint64) func() []Point {
	g := newGen(rand.New(rand.NewPCG(seed, seed)))
	return func() []Point {
		pts := make([]Point, 8)
		for i := range pts {
			pts[i] = g.point()
		}
		return pts
	}
}

// runFaultWorkload runs steps on a DB opened with opts until the first
// error, and abandons the DB. It returns the model of what was
// acknowledged and, when the failed step may still have taken effect, the
// model with it applied.
func runFaultWorkload(dir string, opts *Options, steps []faultStep) (acked, alt *RefModel, failed string) {
	m := NewRefModel()
	db, err := Open(dir, opts)
	if err != nil {
		return m, nil, "open: " + err.Error()
	}
	defer db.Close() // abandoned: its error does not matter
	// Two flushes may run at once whatever the machine's cores.
	db.mu.Lock()
	db.mu.flushLimit = max(db.mu.flushLimit, 2)
	db.mu.Unlock()
	ctx := context.Background()
	for _, s := range steps {
		switch {
		case s.seal:
			db.commitMu.Lock()
			err := db.sealLocked(true)
			db.commitMu.Unlock()
			if err != nil {
				return m, nil, s.name + ": " + err.Error()
			}
		case s.write != nil:
			if err := db.Write(s.write); err != nil {
				alt = m.clone()
				alt.write(s.write)
				return m, alt, s.name + ": " + err.Error()
			}
			m.write(s.write)
		case s.del != nil:
			if err := db.Delete(ctx, *s.del); err != nil {
				alt = m.clone()
				alt.delete(*s.del)
				return m, alt, s.name + ": " + err.Error()
			}
			m.delete(*s.del)
		case s.flush:
			if err := db.Flush(); err != nil {
				return m, nil, s.name + ": " + err.Error()
			}
		case s.comp:
			if err := db.Compact(); err != nil {
				return m, nil, s.name + ": " + err.Error()
			}
		}
	}
	return m, nil, ""
}

// verifyRecovered opens dir without faults and checks that its data equals
// acked, or alt when alt is not nil. With writeAfter it also checks that
// the recovered database takes a write and a flush. It returns a
// description of the first problem, or "".
func verifyRecovered(dir string, acked, alt *RefModel, writeAfter bool) string {
	db, err := Open(dir, crashOptions())
	if err != nil {
		return fmt.Sprintf("reopen without faults: %v", err)
	}
	defer db.Close()
	ctx := context.Background()
	matches := func(m *RefModel) string {
		for _, meas := range genMeasurements {
			q := rawAll(meas)
			got, err := db.Query(ctx, q)
			if err != nil {
				return fmt.Sprintf("query %s: %v", meas, err)
			}
			if d := diffResults(AggNone, got, m.query(q, minTime)); d != "" {
				return meas + ": " + d
			}
		}
		return ""
	}
	d := matches(acked)
	if d != "" && alt != nil {
		if d2 := matches(alt); d2 == "" {
			d = ""
		} else {
			d = fmt.Sprintf("neither without the failed step (%s) nor with it (%s)", d, d2)
		}
	}
	if d != "" {
		return "recovered data: " + d
	}
	if writeAfter {
		if err := db.Write([]Point{pt("after", nil, "v", Int(1), 1)}); err != nil {
			return fmt.Sprintf("write after recovery: %v", err)
		}
		if err := db.Flush(); err != nil {
			return fmt.Sprintf("flush after recovery: %v", err)
		}
	}
	return ""
}

// TestCrashInjection fails every create, write, sync, rename and directory
// sync in turn during a workload of writes, a delete, flushes and a
// compaction.
func TestCrashInjection(t *testing.T) {
	steps := faultWorkload()
	workloadFaults(t, steps, func(o *Options) {
		o.L0CompactionTrigger = 2
		o.BlockSamples = 8
	})
}

// TestCrashInjectionConcurrentFlushes is TestCrashInjection with two
// and three memtables sealed back to back, so that their flushes run at
// once and the younger waits for the older to publish, a delete between
// them.
func TestCrashInjectionConcurrentFlushes(t *testing.T) {
	batch := faultBatches(7)
	sel := Selector{Measurement: "cpu", Start: -100_000, End: 100_000}
	steps := []faultStep{
		{name: "write 0", write: batch()},
		{name: "seal 0", seal: true},
		{name: "write 1", write: batch()},
		{name: "seal 1", seal: true},
		{name: "delete", del: &sel},
		{name: "write 2", write: batch()},
		{name: "seal 2", seal: true},
		{name: "write 3", write: batch()},
		{name: "flush", flush: true},
		{name: "write 4", write: batch()},
	}
	workloadFaults(t, steps, func(o *Options) {
		o.BlockSamples = 8
		o.DisableBackgroundCompaction = true
	})
}

// workloadFaults runs steps once for every filesystem-changing operation
// they reach, failing that operation and every later one, on crashOptions
// changed by configure, and checks that a reopen recovers what was
// acknowledged.
func workloadFaults(t *testing.T, steps []faultStep, configure func(*Options)) {
	n := faultLoop(t, func(i int64) (bool, string) {
		inj := &vfs.OnIndex{N: i, Sticky: true, Match: func(op vfs.Op, _ string) bool { return faultOp(op) }}
		opts := crashOptions()
		configure(opts)
		opts.fs = vfs.Inject(vfs.Default, inj.Injector())
		dir := t.TempDir()
		acked, alt, failed := runFaultWorkload(dir, opts, steps)
		if inj.Count() <= i {
			if failed != "" {
				return false, "fault-free run failed: " + failed
			}
			return false, verifyRecovered(dir, acked, nil, true)
		}
		if failed == "" {
			failed = "only Close failed"
		}
		if p := verifyRecovered(dir, acked, alt, i%8 == 0); p != "" {
			return true, fmt.Sprintf("(%s): %s", failed, p)
		}
		return true, ""
	})
	t.Logf("%d fault points", n)
}

// TestCrashInjectionCompaction fails, in turn, each operation on segment,
// manifest and temporary files during Compact.
func TestCrashInjectionCompaction(t *testing.T) {
	// A template database: four L0 segments and a delete not yet applied.
	template := t.TempDir()
	opts := crashOptions()
	opts.BlockSamples = 8
	opts.TargetSegmentBytes = 2 << 10 // several outputs
	db := openDB(t, template, opts)
	g := newGen(rand.New(rand.NewPCG(6, 6)))
	m := NewRefModel()
	for range 4 {
		pts := make([]Point, 20)
		for i := range pts {
			pts[i] = g.point()
		}
		mustWrite(t, db, pts...)
		m.write(pts)
		mustFlush(t, db)
	}
	del := Selector{Measurement: "mem", Start: -50_000, End: 50_000}
	mustDelete(t, db, del)
	m.delete(del)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	n := compactionFaults(t, template, opts, func(dir string, clean bool) string {
		return verifyRecovered(dir, m, nil, clean)
	})
	t.Logf("%d fault points", n)
}

// TestManifestSyncDirFails fails the directory fsync that follows the
// rename of a new MANIFEST during a flush: the rename took effect, so the
// files the new manifest names must stay, and the data must be there after
// a reopen.
func TestManifestSyncDirFails(t *testing.T) {
	for _, compact := range []bool{false, true} {
		t.Run(fmt.Sprint("compact=", compact), func(t *testing.T) {
			var armed, renamed, failed atomic.Bool
			inj := func(op vfs.Op, name string) error {
				switch {
				case op == vfs.OpRename && strings.HasSuffix(name, "MANIFEST") && armed.Load():
					renamed.Store(true) // the manifest under test is published
				case op == vfs.OpSyncDir && renamed.Load() && !failed.Load():
					failed.Store(true)
					return vfs.ErrInjected
				}
				return nil
			}
			opts := crashOptions()
			opts.L0CompactionTrigger = 2
			opts.fs = vfs.Inject(vfs.Default, inj)
			dir := t.TempDir()
			db, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			m := NewRefModel()
			p := []Point{pt("m", nil, "v", Int(1), 1), pt("m", nil, "v", Int(2), 2)}
			if err := db.Write(p[:1]); err != nil {
				t.Fatal(err)
			}
			m.write(p[:1])
			if compact {
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
				if err := db.Write(p[1:]); err != nil {
					t.Fatal(err)
				}
				m.write(p[1:])
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
				armed.Store(true)
				err = db.Compact()
			} else {
				armed.Store(true)
				err = db.Flush()
			}
			if !failed.Load() {
				t.Fatal("the directory fsync was never attempted")
			}
			t.Logf("the step returned %v", err)
			db.Close()
			if p := verifyRecovered(dir, m, nil, true); p != "" {
				t.Fatal(p)
			}
		})
	}
}

// compactionFaults copies the database at template for every fault point
// of one Compact (each write, sync or rename of a segment, the manifest or
// a temporary file, failing from that point on), opens it with opts,
// compacts, closes, and asks verify about the directory: clean when the
// compaction met no fault. It returns the number of fault points.
func compactionFaults(t *testing.T, template string, opts *Options, verify func(dir string, clean bool) string) int64 {
	return faultLoop(t, func(i int64) (bool, string) {
		dir := filepath.Join(t.TempDir(), "db")
		if err := os.CopyFS(dir, os.DirFS(template)); err != nil {
			return true, err.Error()
		}
		var armed atomic.Bool
		inj := &vfs.OnIndex{N: i, Sticky: true, Match: func(_ vfs.Op, name string) bool {
			return armed.Load() && (strings.HasSuffix(name, ".seg") || strings.HasSuffix(name, "MANIFEST") || strings.HasSuffix(name, ".tmp"))
		}}
		o := *opts
		o.fs = vfs.Inject(vfs.Default, inj.Injector())
		db, err := Open(dir, &o)
		if err != nil {
			return true, "open: " + err.Error()
		}
		armed.Store(true)
		cerr := db.Compact()
		db.Close()
		if inj.Count() <= i {
			if cerr != nil {
				return false, "fault-free compaction failed: " + cerr.Error()
			}
			return false, verify(dir, true)
		}
		if p := verify(dir, false); p != "" {
			return true, fmt.Sprintf("(compact returned %v): %s", cerr, p)
		}
		return true, ""
	})
}
