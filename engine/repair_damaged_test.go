package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/manifest"
)

// A file Repair sets aside is never removed by strata: a second repair
// that sets aside a file of the same name (here a manifest damaged again)
// must not rename over the first one's .damaged copy.
func TestRepairKeepsEarlierDamagedFiles(t *testing.T) {
	dir, _ := buildDB(t)
	mpath := filepath.Join(dir, manifest.Name)
	first := []byte("SMAN first damaged manifest")
	second := []byte("SMAN second damaged manifest")
	writeFile(t, mpath, first)
	wantOpenCorrupt(t, dir)
	mustRepair(t, dir)
	writeFile(t, mpath, second)
	wantOpenCorrupt(t, dir)
	rep := mustRepair(t, dir)

	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var kept [][]byte
	for _, e := range names {
		if strings.HasSuffix(e.Name(), damagedSuffix) {
			kept = append(kept, mustRead(t, filepath.Join(dir, e.Name())))
		}
	}
	for _, want := range [][]byte{first, second} {
		found := false
		for _, k := range kept {
			found = found || bytes.Equal(k, want)
		}
		if !found {
			t.Fatalf("no .damaged file holds %q (report %+v)", want, rep)
		}
	}
	// (The second rebuild loses the delete that the first one recovered
	// from the WAL, as documented, so the batches are not compared.)
	db := openDB(t, dir, quietOptions())
	if _, err := db.Verify(t.Context()); err != nil {
		t.Fatalf("verify after repair: %v", err)
	}
}
