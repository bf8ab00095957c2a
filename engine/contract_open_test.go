package engine_test

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
)

// cTree records every file under dir with its bytes and mode, so a test
// can prove that an open changed nothing.
func cTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel+"/"] = info.Mode().String()
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = info.Mode().String() + " " + info.ModTime().String() + " " + string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func cSameTree(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if w, ok := after[k]; !ok {
			t.Errorf("%s: %s was removed", what, k)
		} else if w != v {
			t.Errorf("%s: %s was changed", what, k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s: %s was created", what, k)
		}
	}
}

func TestContractOpenCreates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatalf("open missing dir with nil options: %v", err)
	}
	if err := db.Write([]engine.Point{cp("m", "f", engine.Float(1), 1)}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	cWantErr(t, "second close", db.Close(), engine.ErrClosed)
	// Options{} is valid too, on an existing empty directory.
	empty := t.TempDir()
	db, err = engine.Open(empty, &engine.Options{})
	if err != nil {
		t.Fatalf("open empty dir with zero options: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// The database made with nil options reopens and holds the point.
	db, err = engine.Open(dir, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}}, "m f: 1=float(1)\n")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	cWantErr(t, "second close, read-only", db.Close(), engine.ErrClosed)
}

func TestContractReadOnlyNeedsDatabase(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	_, err := engine.Open(missing, &engine.Options{ReadOnly: true})
	cWantErr(t, "read-only open of a missing dir", err, engine.ErrNotDatabase)
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read-only open created %s (stat: %v)", missing, err)
	}
	empty := t.TempDir()
	_, err = engine.Open(empty, &engine.Options{ReadOnly: true})
	cWantErr(t, "read-only open of an empty dir", err, engine.ErrNotDatabase)
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("read-only open created %v in an empty dir", ents)
	}
}

func TestContractNotDatabaseUntouched(t *testing.T) {
	for _, ro := range []bool{false, true} {
		dir := t.TempDir()
		files := map[string]string{
			"000042.seg":        "not a segment",
			"keep.tmp":          "temp file of someone else",
			"wal/00000009.wal":  "some bytes that are not a wal",
			"notes.txt":         "hello",
			"MANIFEST.tmp.save": "x",
		}
		for name, body := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := cTree(t, dir)
		db, err := engine.Open(dir, &engine.Options{ReadOnly: ro})
		if err == nil {
			db.Close()
		}
		cWantErr(t, "open of a directory holding no database", err, engine.ErrNotDatabase)
		cSameTree(t, "open of a non-database", before, cTree(t, dir))
	}
	// A lone file that merely bears the name of one of strata's own is
	// somebody else's: the directory is not empty.
	for _, name := range []string{"LOCK", "MANIFEST.tmp", "MANIFEST", "SERIES", "000001.seg"} {
		for _, ro := range []bool{false, true} {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, name), []byte("someone else's file"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := cTree(t, dir)
			db, err := engine.Open(dir, &engine.Options{ReadOnly: ro})
			if err == nil {
				db.Close()
			}
			cWantErr(t, "open of a directory holding only a foreign "+name, err, engine.ErrNotDatabase)
			cSameTree(t, "open of a directory holding only a foreign "+name, before, cTree(t, dir))
		}
	}
}

// A database whose manifest is missing or unreadable is ErrCorrupt, and
// nothing is deleted or changed, by a writable or a read-only open.
func TestContractBadManifestIsCorrupt(t *testing.T) {
	damage := map[string]func(t *testing.T, path string){
		"missing": func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		},
		"empty": func(t *testing.T, path string) { cOverwrite(t, path, func([]byte) []byte { return nil }) },
		"garbage": func(t *testing.T, path string) {
			cOverwrite(t, path, func([]byte) []byte { return []byte("garbage!") })
		},
		"cut": func(t *testing.T, path string) { cOverwrite(t, path, func(b []byte) []byte { return b[:len(b)/2] }) },
		"flipped": func(t *testing.T, path string) {
			cOverwrite(t, path, func(b []byte) []byte { b[len(b)-1] ^= 0x40; return b })
		},
	}
	for name, f := range damage {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			db, err := engine.Open(dir, cOpts(0))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if err := db.Write([]engine.Point{cp("m", "f", engine.Float(float64(i)), int64(i))}); err != nil {
					t.Fatal(err)
				}
				cFlush(t, db)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			f(t, filepath.Join(dir, "MANIFEST"))
			before := cTree(t, dir)
			for _, ro := range []bool{true, false} {
				o := cOpts(0)
				o.ReadOnly = ro
				db, err := engine.Open(dir, o)
				if err == nil {
					db.Close()
				}
				cWantErr(t, "open with a "+name+" manifest", err, engine.ErrCorrupt)
				cSameTree(t, "open with a "+name+" manifest", before, cTree(t, dir))
			}
		})
	}
}

func cOverwrite(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestContractReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w, err := engine.Open(dir, cOpts(0))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write([]engine.Point{cp("m", "f", engine.Float(1), 1, "k=a")}); err != nil {
		t.Fatal(err)
	}
	cFlush(t, w)
	if err := w.Write([]engine.Point{cp("m", "f", engine.Float(2), 2, "k=b")}); err != nil {
		t.Fatal(err)
	}
	before := cTree(t, dir)
	o := cOpts(0)
	o.ReadOnly = true
	ro, err := engine.Open(dir, o)
	if err != nil {
		t.Fatalf("read-only open beside a writer: %v", err)
	}
	// A write after the read-only open is not in its snapshot.
	if err := w.Write([]engine.Point{cp("m", "f", engine.Float(3), 3, "k=c")}); err != nil {
		t.Fatal(err)
	}
	want := "m,k=a f: 1=float(1)\nm,k=b f: 2=float(2)\n"
	cWantQuery(t, ro, engine.Query{Selector: engine.Selector{Measurement: "m"}}, want)
	if got := cFmt(cLast(t, ro, engine.Selector{})); got != want {
		t.Errorf("read-only Last = %q, want %q", got, want)
	}
	vals, err := ro.TagValues(ctx, "k", engine.Selector{})
	if err != nil || !slices.Equal(vals, []string{"a", "b"}) {
		t.Errorf("read-only TagValues = %q, %v", vals, err)
	}
	cWantErr(t, "read-only Write", ro.Write([]engine.Point{cp("m", "f", engine.Float(1), 9)}), engine.ErrReadOnly)
	cWantErr(t, "read-only Delete", ro.Delete(ctx, engine.Selector{Measurement: "m"}), engine.ErrReadOnly)
	cWantErr(t, "read-only Flush", ro.Flush(), engine.ErrReadOnly)
	cWantErr(t, "read-only Compact", ro.Compact(), engine.ErrReadOnly)
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	cWantErr(t, "read-only second Close", ro.Close(), engine.ErrClosed)
	// Only the writer's own later write may have changed files; the
	// read-only DB changed nothing that existed (checked on the files the
	// writer does not append to: segments and the manifest).
	after := cTree(t, dir)
	for k, v := range before {
		if strings.HasPrefix(k, "wal") {
			continue
		}
		if after[k] != v {
			t.Errorf("read-only open changed or removed %s", k)
		}
	}
	// A second writable open fails while the writer holds the directory.
	if db2, err := engine.Open(dir, cOpts(0)); err == nil {
		db2.Close()
		t.Errorf("second writable open succeeded")
	}
	// The read-only open neither wrote the writer's data away nor locked it.
	cWantQuery(t, w, engine.Query{Selector: engine.Selector{Measurement: "m"}}, want+"m,k=c f: 3=float(3)\n")
}

func TestContractReadOnlyWritesNothing(t *testing.T) {
	dir := t.TempDir()
	db, err := engine.Open(dir, cOpts(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write([]engine.Point{cp("m", "f", engine.Float(1), 1)}); err != nil {
		t.Fatal(err)
	}
	cFlush(t, db)
	if err := db.Write([]engine.Point{cp("m", "f", engine.Float(2), 2)}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before := cTree(t, dir)
	o := cOpts(0)
	o.ReadOnly = true
	ro, err := engine.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	cWantQuery(t, ro, engine.Query{Selector: engine.Selector{Measurement: "m"}}, "m f: 1=float(1) 2=float(2)\n")
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	cSameTree(t, "read-only open and close", before, cTree(t, dir))
}

// Write is atomic per call: an invalid point or a kind conflict anywhere
// in the call stores nothing of it, and the error names the point.
func TestContractWriteAtomic(t *testing.T) {
	ctx := context.Background()
	bad := []struct {
		name   string
		pts    []engine.Point
		target error
	}{
		{"NaN second", []engine.Point{cp("m", "f", engine.Float(1), 1), cp("m", "f", engine.Float(math.NaN()), 2)}, engine.ErrInvalid},
		{"Inf", []engine.Point{cp("m", "g", engine.Int(1), 1), cp("m", "f", engine.Float(math.Inf(-1)), 2)}, engine.ErrInvalid},
		{"empty tag value", []engine.Point{cp("m", "f", engine.Float(1), 1), cp("m", "f", engine.Float(1), 2, "k=")}, engine.ErrInvalid},
		{"duplicate tag", []engine.Point{cp("m", "f", engine.Float(1), 1), cp("m", "f", engine.Float(1), 2, "k=a", "k=b")}, engine.ErrInvalid},
		{"no fields", []engine.Point{cp("m", "f", engine.Float(1), 1), {Measurement: "m", Time: 2}}, engine.ErrInvalid},
		{"newline", []engine.Point{cp("m", "f", engine.Float(1), 1), cp("m\nx", "f", engine.Float(1), 2)}, engine.ErrInvalid},
		{"empty measurement", []engine.Point{cp("m", "f", engine.Float(1), 1), cp("", "f", engine.Float(1), 2)}, engine.ErrInvalid},
		{"empty field key", []engine.Point{cp("m", "f", engine.Float(1), 1), cp("m", "", engine.Float(1), 2)}, engine.ErrInvalid},
		{"zero value", []engine.Point{cp("m", "f", engine.Float(1), 1), cp("m", "f", engine.Value{}, 2)}, engine.ErrInvalid},
		{"kind conflict in call", []engine.Point{cp("m", "f", engine.Float(1), 1), cp("m", "f", engine.Int(1), 2)}, engine.ErrFieldTypeConflict},
		{"kind conflict with stored", []engine.Point{cp("m", "f", engine.Float(1), 1), cp("old", "f", engine.String("x"), 2)}, engine.ErrFieldTypeConflict},
	}
	inWritableStates(t, nil, []cStep{cWrite(cp("old", "f", engine.Float(0), 0))}, func(t *testing.T, db *engine.DB) {
		for _, c := range bad {
			err := db.Write(c.pts)
			cWantErr(t, c.name, err, c.target)
			if err != nil && !strings.Contains(err.Error(), "1") {
				t.Errorf("%s: error %q names neither the point's index nor the field", c.name, err)
			}
			res, qerr := db.Query(ctx, engine.Query{Selector: engine.Selector{Measurement: "m"}})
			if qerr != nil || len(res) != 0 {
				t.Errorf("%s: after a failed Write, m holds %s (%v)", c.name, cFmt(res), qerr)
			}
		}
		// The series the failed calls would have made have no kind yet.
		if err := db.Write([]engine.Point{cp("m", "f", engine.Int(7), 3), cp("m", "g", engine.String("s"), 3)}); err != nil {
			t.Errorf("write after failed calls: %v", err)
		}
		cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "old"}}, "old f: 0=float(0)\n")
	})
}

// After Close, every call returns ErrClosed, on a writable and a read-only
// DB alike.
func TestContractClosed(t *testing.T) {
	ctx := context.Background()
	for _, ro := range []bool{false, true} {
		dir := t.TempDir()
		db, err := engine.Open(dir, cOpts(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Write([]engine.Point{cp("m", "f", engine.Int(1), 1)}); err != nil {
			t.Fatal(err)
		}
		if ro {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			o := cOpts(0)
			o.ReadOnly = true
			if db, err = engine.Open(dir, o); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		s := engine.Selector{Measurement: "m"}
		_, err = db.Query(ctx, engine.Query{Selector: s})
		cWantErr(t, "Query after Close", err, engine.ErrClosed)
		_, err = db.Measurements(ctx)
		cWantErr(t, "Measurements after Close", err, engine.ErrClosed)
		_, err = db.TagKeys(ctx, s)
		cWantErr(t, "TagKeys after Close", err, engine.ErrClosed)
		_, err = db.TagValues(ctx, "k", s)
		cWantErr(t, "TagValues after Close", err, engine.ErrClosed)
		_, err = db.SeriesInfo(ctx, s)
		cWantErr(t, "SeriesInfo after Close", err, engine.ErrClosed)
		_, err = db.Last(ctx, s)
		cWantErr(t, "Last after Close", err, engine.ErrClosed)
		cWantErr(t, "Write after Close", db.Write([]engine.Point{cp("m", "f", engine.Int(1), 2)}), engine.ErrClosed)
		cWantErr(t, "Delete after Close", db.Delete(ctx, s), engine.ErrClosed)
		cWantErr(t, "Flush after Close", db.Flush(), engine.ErrClosed)
		cWantErr(t, "Compact after Close", db.Compact(), engine.ErrClosed)
		cWantErr(t, "second Close", db.Close(), engine.ErrClosed)
	}
}

// A torn tail on the last WAL file is the unacknowledged end of a crash: a
// read-only open serves what precedes it and changes no byte; a writable
// open drops it and keeps every acknowledged point.
func TestContractTornWALTail(t *testing.T) {
	live := t.TempDir()
	db, err := engine.Open(live, cOpts(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := db.Write([]engine.Point{cp("m", "f", engine.Int(int64(i)), int64(i))}); err != nil {
			t.Fatal(err)
		}
	}
	// The state a kill -9 leaves: the files as they are, unclosed.
	dir := filepath.Join(t.TempDir(), "crashed")
	if err := os.CopyFS(dir, os.DirFS(live)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wals, err := filepath.Glob(filepath.Join(dir, "wal", "*"))
	if err != nil || len(wals) == 0 {
		t.Fatalf("no WAL files: %v", err)
	}
	slices.Sort(wals)
	last := wals[len(wals)-1]
	f, err := os.OpenFile(last, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0x17, 0, 0, 0, 1, 2, 3}); err != nil { // a record cut short
		t.Fatal(err)
	}
	f.Close()
	want := "m f: 0=int(0) 1=int(1) 2=int(2) 3=int(3) 4=int(4)\n"
	before := cTree(t, dir)
	o := cOpts(0)
	o.ReadOnly = true
	ro, err := engine.Open(dir, o)
	if err != nil {
		t.Fatalf("read-only open with a torn WAL tail: %v", err)
	}
	cWantQuery(t, ro, engine.Query{Selector: engine.Selector{Measurement: "m"}}, want)
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	cSameTree(t, "read-only open with a torn WAL tail", before, cTree(t, dir))
	db, err = engine.Open(dir, cOpts(0))
	if err != nil {
		t.Fatalf("open with a torn WAL tail: %v", err)
	}
	defer db.Close()
	cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}}, want)
}
