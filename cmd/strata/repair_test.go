package main

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
)

// snapshot maps every file under dir to its bytes.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := make(map[string]string)
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			m[rel+"/"] = ""
			return nil
		}
		b, _ := os.ReadFile(p)
		m[rel] = string(b)
		return nil
	})
	return m
}

func sameSnapshot(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func runCmd(t *testing.T, main func(context.Context, []string, io.Writer, io.Writer) int, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestReadCommandsChangeNothing(t *testing.T) {
	notadb := t.TempDir()
	for name, data := range map[string]string{"000042.seg": "x", "keep.tmp": "y", "wal/00000009.wal": "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"} {
		os.MkdirAll(filepath.Dir(filepath.Join(notadb, name)), 0o755)
		os.WriteFile(filepath.Join(notadb, name), []byte(data), 0o644)
	}
	before := snapshot(t, notadb)
	if code, _, errs := runCmd(t, queryMain, "--db", notadb, "--measurement", "m"); code != 1 || !strings.Contains(errs, "not a strata database") {
		t.Fatalf("query of a foreign dir: %d %q", code, errs)
	}
	if code, out, _ := runCmd(t, verifyMain, "--db", notadb); code == 0 || strings.Contains(out, "ok") {
		t.Fatalf("verify of a foreign dir: %d %q", code, out)
	}
	if !sameSnapshot(before, snapshot(t, notadb)) {
		t.Fatal("a read command changed a foreign directory")
	}

	// A database without its manifest: verify reports it, changes nothing.
	dir := writeTestDB(t)
	os.Remove(filepath.Join(dir, "MANIFEST"))
	before = snapshot(t, dir)
	if code, out, errs := runCmd(t, verifyMain, "--db", dir); code != 1 || strings.Contains(out, "ok") || !strings.Contains(errs, "corrupt") {
		t.Fatalf("verify without a manifest: %d %q %q", code, out, errs)
	}
	if code, _, _ := runCmd(t, queryMain, "--db", dir, "--measurement", "sensor"); code != 1 {
		t.Fatalf("query without a manifest: %d", code)
	}
	if !sameSnapshot(before, snapshot(t, dir)) {
		t.Fatal("a read command changed a database without its manifest")
	}

	// repair rebuilds it.
	code, out, errs := runCmd(t, repairMain, "--db", dir)
	if code != 1 || !strings.Contains(out, "manifest rebuilt") || !strings.Contains(out, "not recovered") {
		t.Fatalf("repair: %d %q %q", code, out, errs)
	}
	if code, out, errs := runCmd(t, verifyMain, "--db", dir); code != 0 || !strings.Contains(out, "samples 120") {
		t.Fatalf("verify after repair: %d %q %q", code, out, errs)
	}
}

func TestVerifyBesideWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 50 {
		if err := db.Write([]engine.Point{{Measurement: "m", Fields: []engine.Field{{Key: "v", Value: engine.Int(int64(i))}}, Time: int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, dir)
	code, out, errs := runCmd(t, verifyMain, "--db", dir)
	if code != 0 || !strings.Contains(out, "wal samples 50") {
		t.Fatalf("verify beside a writer: %d %q %q", code, out, errs)
	}
	code, out, errs = runCmd(t, queryMain, "--db", dir, "--measurement", "m", "--agg", "count")
	if code != 0 || !strings.Contains(out, ",50\n") {
		t.Fatalf("query beside a writer: %d %q %q", code, out, errs)
	}
	if !sameSnapshot(before, snapshot(t, dir)) {
		t.Fatal("verify or query changed the database of a running writer")
	}
}
