package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/vfs"
)

// checkpointOptions are small enough that the workload flushes, compacts
// and rolls WAL files often; retention hides and drops the oldest samples.
func checkpointOptions() *Options {
	return &Options{
		Logger:              slog.New(slog.DiscardHandler),
		Sync:                SyncNever,
		MemTableBytes:       4 << 10,
		BlockSamples:        8,
		L0CompactionTrigger: 2,
		TargetSegmentBytes:  4 << 10,
		L1TargetBytes:       16 << 10,
		WALSegmentBytes:     8 << 10,
		Retention:           200 * time.Microsecond,
		Now:                 func() time.Time { return time.Unix(0, 0) },
	}
}

// TestCheckpointModel takes checkpoints at random moments of a randomized
// workload (writes, deletes, flushes, compactions, retention) running in
// another goroutine, then opens each one and compares it with the model as
// of the sequence number the checkpoint reports.
func TestCheckpointModel(t *testing.T) {
	for _, seed := range []uint64{21, 22} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			runCheckpointModel(t, seed)
		})
	}
}

func runCheckpointModel(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed*7+1))
	g := newGen(r)
	opts := checkpointOptions()
	cutoff := opts.Now().UnixNano() - int64(opts.Retention)
	dir := t.TempDir()
	db := openDB(t, dir, opts)
	defer db.Close()
	ctx := context.Background()

	// models[seq] is the model after the operation that took seq.
	var mu sync.Mutex
	models := map[uint64]*RefModel{0: NewRefModel()}
	m := NewRefModel()

	type taken struct {
		dir  string
		info CheckpointInfo
	}
	var cps []taken
	// The workload asks for a checkpoint now and then, and goes on while
	// it is taken.
	tick := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			if _, ok := <-tick; !ok {
				return
			}
			cdir := filepath.Join(t.TempDir(), fmt.Sprint("cp", i))
			info, err := db.Checkpoint(ctx, cdir)
			if err != nil {
				t.Errorf("checkpoint %d: %v", i, err)
				return
			}
			cps = append(cps, taken{cdir, info})
		}
	})

	steps := 400
	if raceEnabled {
		steps = 250
	}
	for step := range steps {
		where := fmt.Sprintf("seed %d step %d", seed, step)
		switch x := r.IntN(100); {
		case x < 60:
			pts := g.batch()
			want := m.write(pts)
			err := db.Write(pts)
			if (want < 0) != (err == nil) {
				t.Fatalf("%s: write: %v (model conflict at %d)", where, err, want)
			}
		case x < 72:
			sel := g.selector()
			if err := db.Delete(ctx, sel); err != nil {
				t.Fatalf("%s: delete: %v", where, err)
			}
			m.delete(sel)
		case x < 85:
			if err := db.Flush(); err != nil {
				t.Fatalf("%s: flush: %v", where, err)
			}
		default:
			if err := db.Compact(); err != nil {
				t.Fatalf("%s: compact: %v", where, err)
			}
		}
		mu.Lock()
		models[db.seq.Load()] = m.clone()
		mu.Unlock()
		if r.IntN(15) == 0 {
			select {
			case tick <- struct{}{}:
			default:
			}
		}
	}
	close(tick)
	wg.Wait()
	if len(cps) < 3 {
		// Too few to mean much: take some more at the end.
		for i := range 3 {
			cdir := filepath.Join(t.TempDir(), fmt.Sprint("end", i))
			info, err := db.Checkpoint(ctx, cdir)
			if err != nil {
				t.Fatal(err)
			}
			cps = append(cps, taken{cdir, info})
		}
	}
	for i, cp := range cps {
		want, ok := models[cp.info.Seq]
		if !ok {
			t.Fatalf("checkpoint %d: seq %d is no operation's", i, cp.info.Seq)
		}
		if cp.info.Files < 2 || cp.info.Bytes <= 0 {
			t.Errorf("checkpoint %d: info %+v", i, cp.info)
		}
		for _, ro := range []bool{true, false} {
			o := checkpointOptions()
			o.ReadOnly = ro
			c, err := Open(cp.dir, o)
			if err != nil {
				t.Fatalf("open checkpoint %d (seq %d, read-only %v): %v", i, cp.info.Seq, ro, err)
			}
			where := fmt.Sprintf("checkpoint %d at seq %d (read-only %v)", i, cp.info.Seq, ro)
			for _, meas := range genMeasurements {
				checkQuery(t, c, want, rawAll(meas), cutoff, where)
			}
			if rep, err := c.Verify(ctx); err != nil {
				t.Errorf("%s: verify: %v (%+v)", where, err, rep)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The source is unchanged by all this: it still equals the model.
	for _, meas := range genMeasurements {
		checkQuery(t, db, m, rawAll(meas), cutoff, "source after checkpoints")
	}
	t.Logf("%d checkpoints, seqs %v", len(cps), func() []uint64 {
		var s []uint64
		for _, c := range cps {
			s = append(s, c.info.Seq)
		}
		return s
	}())
}

// TestCheckpointReadOnly takes a checkpoint through a ReadOnly handle while
// a writer in the same process goes on writing and compacting, and checks
// that it holds everything written before the call.
func TestCheckpointReadOnly(t *testing.T) {
	opts := checkpointOptions()
	opts.Retention = 0
	dir := t.TempDir()
	db := openDB(t, dir, opts)
	defer db.Close()
	ctx := context.Background()
	g := newGen(rand.New(rand.NewPCG(3, 4)))
	m := NewRefModel()
	for range 200 {
		pts := g.batch()
		if m.write(pts) < 0 {
			if err := db.Write(pts); err != nil {
				t.Fatal(err)
			}
		}
	}
	ro := openDB(t, dir, &Options{ReadOnly: true, Logger: slog.New(slog.DiscardHandler)})
	defer ro.Close()
	// The writer goes on meanwhile; its later writes go to a measurement of
	// their own so the model of what came before stays exact.
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := int64(0); ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if err := db.Write([]Point{{Measurement: "later", Fields: []Field{{Key: "v", Value: Int(i)}}, Time: i}}); err != nil {
				t.Error(err)
				return
			}
			if i%50 == 0 {
				if err := db.Compact(); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	cdir := filepath.Join(t.TempDir(), "cp")
	info, err := ro.Checkpoint(ctx, cdir)
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	c := openDB(t, cdir, &Options{ReadOnly: true, Logger: slog.New(slog.DiscardHandler)})
	defer c.Close()
	for _, meas := range genMeasurements {
		checkQuery(t, c, m, rawAll(meas), minTime, "read-only checkpoint")
	}
	// "later" holds a prefix 0..n-1 of the writer's sequence: never a gap.
	res, err := c.Query(ctx, rawAll("later"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 1 {
		for i, s := range res[0].Samples {
			if s.Time != int64(i) || s.Value.Int() != int64(i) {
				t.Fatalf("later: sample %d is %v", i, s)
			}
		}
	}
	if info.Seq == 0 || info.Files == 0 {
		t.Errorf("info %+v", info)
	}
}

// TestCheckpointTarget checks the rules for the target directory.
func TestCheckpointTarget(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, checkpointOptions())
	defer db.Close()
	ctx := context.Background()
	if err := db.Write([]Point{pt("m", nil, "v", Int(1), 1)}); err != nil {
		t.Fatal(err)
	}
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Checkpoint(ctx, full); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("non-empty target: %v", err)
	}
	if _, err := db.Checkpoint(ctx, dir); !errors.Is(err, ErrInvalid) {
		t.Errorf("own directory: %v", err)
	}
	// Nor inside it (its empty wal directory, a new subdirectory), also
	// through a symbolic link; a sibling whose name shares its prefix is
	// fine.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, inside := range []string{filepath.Join(dir, "wal"), filepath.Join(dir, "backup", "x"), filepath.Join(link, "b"), dir + "/sub/.."} {
		if _, err := db.Checkpoint(ctx, inside); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "inside") {
			t.Errorf("checkpoint into %s: %v", inside, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "backup")); !os.IsNotExist(err) {
		t.Errorf("a refused checkpoint created a directory: %v", err)
	}
	if _, err := db.Checkpoint(ctx, dir+"-sibling"); err != nil {
		t.Errorf("sibling: %v", err)
	}
	// An empty existing directory is fine, and so is a missing one.
	for _, target := range []string{t.TempDir(), filepath.Join(t.TempDir(), "a", "b")} {
		info, err := db.Checkpoint(ctx, target)
		if err != nil || info.Seq != 1 {
			t.Fatalf("checkpoint to %s: %+v, %v", target, info, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := db.Checkpoint(cctx, filepath.Join(t.TempDir(), "c")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	db.Close()
	if _, err := db.Checkpoint(ctx, filepath.Join(t.TempDir(), "d")); !errors.Is(err, ErrClosed) {
		t.Errorf("closed: %v", err)
	}
}

// TestCheckpointFaults fails every filesystem operation of a checkpoint in
// turn: the source keeps every write and opens as before, and the target
// is either a complete checkpoint or one that Open refuses as incomplete,
// never a database with gaps.
func TestCheckpointFaults(t *testing.T) {
	src := t.TempDir()
	opts := checkpointOptions()
	opts.Retention = 0
	db := openDB(t, src, opts)
	defer db.Close()
	g := newGen(rand.New(rand.NewPCG(9, 9)))
	m := NewRefModel()
	for j := range 120 {
		pts := g.batch()
		if m.write(pts) < 0 {
			if err := db.Write(pts); err != nil {
				t.Fatal(err)
			}
		}
		if j == 60 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := int64(0); ; i++ {
		// Each checkpoint rotates the WAL: flush, so that the files to copy
		// stay about as many, then write more for the WAL to hold.
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		for range 10 {
			pts := g.batch()
			if m.write(pts) < 0 {
				if err := db.Write(pts); err != nil {
					t.Fatal(err)
				}
			}
		}
		target := filepath.Join(t.TempDir(), "cp")
		inj := &vfs.OnIndex{N: i, Sticky: true, Match: func(op vfs.Op, name string) bool {
			return strings.HasPrefix(name, target) && faultOp(op)
		}}
		// The checkpoint's target alone goes through the injecting filesystem.
		db.testCheckpointFS = func(fs vfs.FS) vfs.FS { return vfs.Inject(fs, inj.Injector()) }
		_, cerr := db.Checkpoint(context.Background(), target)
		db.testCheckpointFS = nil
		for _, meas := range genMeasurements {
			checkQuery(t, db, m, rawAll(meas), minTime, fmt.Sprintf("fault %d: source", i))
		}
		c, oerr := Open(target, &Options{ReadOnly: true, Logger: slog.New(slog.DiscardHandler)})
		switch {
		case cerr == nil:
			if oerr != nil {
				t.Fatalf("fault %d: checkpoint succeeded, open failed: %v", i, oerr)
			}
			for _, meas := range genMeasurements {
				checkQuery(t, c, m, rawAll(meas), minTime, fmt.Sprintf("fault %d: checkpoint", i))
			}
			c.Close()
		case oerr == nil:
			// A failure after the manifest landed (removing the marker):
			// the copy must then be whole.
			for _, meas := range genMeasurements {
				checkQuery(t, c, m, rawAll(meas), minTime, fmt.Sprintf("fault %d: failed checkpoint that opens", i))
			}
			c.Close()
		case !errors.Is(oerr, ErrCorrupt) && !errors.Is(oerr, ErrNotDatabase):
			t.Fatalf("fault %d: open of a failed checkpoint: %v", i, oerr)
		}
		if inj.Count() <= i {
			if cerr != nil {
				t.Fatalf("fault-free checkpoint failed: %v", cerr)
			}
			if i < 10 {
				t.Fatalf("only %d operations", i)
			}
			break
		}
	}
	// The source, reopened, still holds every write.
	db = reopen(t, db, src, opts)
	for _, meas := range genMeasurements {
		checkQuery(t, db, m, rawAll(meas), minTime, "source reopened")
	}
}

// TestCheckpointIncompleteRefused checks that Open, writable or not,
// refuses a directory that holds the marker of an unfinished checkpoint,
// naming it, and changes nothing in it.
func TestCheckpointIncompleteRefused(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, checkpointOptions())
	if err := db.Write([]Point{pt("m", nil, "v", Int(1), 1)}); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "cp")
	if _, err := db.Checkpoint(context.Background(), target); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := os.WriteFile(filepath.Join(target, checkpointMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		_, err := Open(target, &Options{ReadOnly: ro})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "incomplete checkpoint") {
			t.Errorf("read-only %v: %v", ro, err)
		}
	}
	if _, err := os.Stat(filepath.Join(target, lockName)); !os.IsNotExist(err) {
		t.Errorf("open of an incomplete checkpoint created LOCK: %v", err)
	}
}
