package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestVerify(t *testing.T) {
	dir := t.TempDir()
	opts := benchOptions()
	db := openDB(t, dir, opts)
	var pts []Point
	for i := range 3000 {
		pts = append(pts, pt("m", []Tag{{Key: "k", Value: "a"}}, "v", Float(float64(i)/4), int64(i)))
	}
	mustWrite(t, db, pts...)
	mustFlush(t, db)
	rep, err := db.Verify(context.Background())
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if rep.Segments != 1 || rep.Series != 1 || rep.Samples != 3000 || rep.Blocks != 3 {
		t.Fatalf("Verify read %+v, want 1 segment, 1 series, 3 blocks, 3000 samples", rep)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Damage one byte inside the first block's values: Open still works
	// (the index and footer are intact); Verify finds the damage.
	names, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(names) != 1 {
		t.Fatalf("segments: %v", names)
	}
	data, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	data[40] ^= 0xff
	if err := os.WriteFile(names[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dir, opts)
	_, err = db.Verify(context.Background())
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify of a damaged block = %v, want ErrCorrupt", err)
	}
	var ce *CorruptionError
	if !errors.As(err, &ce) || !strings.HasSuffix(ce.Path, filepath.Base(names[0])) {
		t.Fatalf("Verify error %v does not name the segment", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Verify(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Verify after Close = %v, want ErrClosed", err)
	}
}

// Compact and Close called at once must not race: Close cancels and waits
// for a running compaction, and Compact after Close is ErrClosed.
func TestCompactDuringClose(t *testing.T) {
	for range 2 {
		opts := benchOptions()
		opts.DisableBackgroundCompaction = true
		db := openDB(t, t.TempDir(), opts)
		// Few long series: the merge takes a while and Close overtakes it.
		for f := range 6 {
			var pts []Point
			for i := range 40000 {
				pts = append(pts, pt("m", []Tag{{Key: "k", Value: string(rune('a' + i%8))}}, "v", Int(int64(i)), int64(f*40000+i)))
			}
			mustWrite(t, db, pts...)
			mustFlush(t, db)
		}
		done := make(chan error, 1)
		go func() { done <- db.Compact() }()
		for db.Stats().Compactions == 0 && len(done) == 0 && !db.compactRunning() {
			runtime.Gosched()
		}
		cerr := db.Close()
		err := <-done
		if cerr != nil {
			t.Fatalf("Close: %v", cerr)
		}
		if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, context.Canceled) {
			t.Fatalf("Compact racing Close = %v, want nil, ErrClosed or context.Canceled", err)
		}
	}
}

// compactRunning reports whether a compaction holds compactMu.
func (db *DB) compactRunning() bool {
	if db.compactMu.TryLock() {
		db.compactMu.Unlock()
		return false
	}
	return true
}
