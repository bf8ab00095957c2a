package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// checkpointerDirEnv, when set, makes the test binary a process that writes
// to the database in that directory and checkpoints it over and over into
// <dir>.ckpt/N, until it is killed.
const checkpointerDirEnv = "STRATA_TEST_CHECKPOINTER_DIR"

// runCheckpointerProcess writes batches of writerBatch points of series
// "w v" (batch i holds times writerBatch*i ..) and checkpoints after every
// 20 batches. It prints "acked N" once N batches are acknowledged and
// "checkpoint N" as it starts checkpoint N.
func runCheckpointerProcess(dir string) int {
	opts := &Options{
		Logger:              slog.New(slog.DiscardHandler),
		MemTableBytes:       16 << 10,
		WALSegmentBytes:     4 << 10,
		L0CompactionTrigger: 2,
		Sync:                SyncAlways,
	}
	db, err := Open(dir, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "checkpointer: open:", err)
		return 1
	}
	pts := make([]Point, writerBatch)
	for n, c := 0, 0; ; n++ {
		for j := range pts {
			tm := int64(writerBatch*n + j)
			pts[j] = Point{Measurement: "w", Fields: []Field{{Key: "v", Value: Int(tm)}}, Time: tm}
		}
		if err := db.Write(pts); err != nil {
			fmt.Fprintln(os.Stderr, "checkpointer: write:", err)
			return 1
		}
		fmt.Printf("acked %d\n", n+1)
		if n%20 == 19 {
			fmt.Printf("checkpoint %d\n", c)
			if _, err := db.Checkpoint(context.Background(), filepath.Join(dir+".ckpt", strconv.Itoa(c))); err != nil {
				fmt.Fprintln(os.Stderr, "checkpointer: checkpoint:", err)
				return 1
			}
			c++
		}
	}
}

// TestCheckpointKill9 kills (SIGKILL) a process in the middle of its
// checkpoints, at a different moment each round: the source database
// keeps every acknowledged write, and every checkpoint directory either
// opens as a whole database (a prefix of whole batches, no gap) or is
// refused (ErrCorrupt: marked incomplete; ErrNotDatabase: killed before
// its first file), never opened with silent gaps.
func TestCheckpointKill9(t *testing.T) {
	for round := range 4 {
		dir := filepath.Join(t.TempDir(), "db")
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), checkpointerDirEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill right after checkpoint 3+round has started: a moment inside
		// a checkpoint that moves with the round and the machine.
		acked := 0
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			l := lines.Text()
			if v, ok := strings.CutPrefix(l, "acked "); ok {
				acked, _ = strconv.Atoi(v)
			}
			if l == fmt.Sprintf("checkpoint %d", 3+round) {
				break
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
		if acked == 0 {
			t.Fatalf("round %d: the process acknowledged nothing; stderr: %s", round, stderr.String())
		}

		check := func(what, d string) (batches int, err error) {
			t.Helper()
			opts := quietOptions()
			opts.ReadOnly = true
			db, err := Open(d, opts)
			if err != nil {
				return 0, err
			}
			defer db.Close()
			res := mustQuery(t, db, rawAll("w"))
			if len(res) != 1 {
				t.Fatalf("round %d: %s: %d series", round, what, len(res))
			}
			ss := res[0].Samples
			for i, s := range ss {
				if s.Time != int64(i) || s.Value.Int() != int64(i) {
					t.Fatalf("round %d: %s: sample %d is %d=%v: a gap or a foreign value", round, what, i, s.Time, s.Value)
				}
			}
			if len(ss)%writerBatch != 0 {
				t.Fatalf("round %d: %s: %d samples: half a batch", round, what, len(ss))
			}
			return len(ss) / writerBatch, nil
		}
		n, err := check("source", dir)
		if err != nil {
			t.Fatalf("round %d: source: %v", round, err)
		}
		if n < acked {
			t.Fatalf("round %d: source holds %d batches, %d were acknowledged", round, n, acked)
		}
		ents, err := os.ReadDir(dir + ".ckpt")
		if err != nil {
			t.Fatal(err)
		}
		refused := 0
		for _, e := range ents {
			c, err := check("checkpoint "+e.Name(), filepath.Join(dir+".ckpt", e.Name()))
			switch {
			case errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotDatabase):
				// Incomplete (marked) or killed before its first file.
				refused++
			case err != nil:
				t.Fatalf("round %d: checkpoint %s: %v, want a whole database, ErrCorrupt or ErrNotDatabase", round, e.Name(), err)
			case c < 20*(mustAtoi(t, e.Name())+1):
				t.Fatalf("round %d: checkpoint %s holds %d batches, taken after %d", round, e.Name(), c, 20*(mustAtoi(t, e.Name())+1))
			}
		}
		if refused > 1 {
			t.Fatalf("round %d: %d checkpoints refused; only the one killed may be incomplete", round, refused)
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
