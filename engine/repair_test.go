package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/manifest"

	"github.com/stratadb/strata/wal"
)

func mustRepair(t *testing.T, dir string) RepairReport {
	t.Helper()
	rep, err := Repair(dir, quietOptions())
	if err != nil {
		t.Fatalf("Repair: %v (report %+v)", err, rep)
	}
	return rep
}

func wantOpenCorrupt(t *testing.T, dir string) {
	t.Helper()
	db, err := Open(dir, quietOptions())
	if err == nil {
		db.Close()
		t.Fatal("Open of the damaged database succeeded")
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
}

func TestRepairMissingManifest(t *testing.T) {
	dir, batches := buildDB(t)
	os.Remove(filepath.Join(dir, manifest.Name))
	wantOpenCorrupt(t, dir)
	rep := mustRepair(t, dir)
	if !rep.ManifestRebuilt || rep.Segments == 0 || len(rep.Lost) == 0 {
		t.Fatalf("report %+v", rep)
	}
	db := openDB(t, dir, quietOptions())
	if n := checkBatches(t, db, batches); n != batches {
		t.Fatalf("after repair: %d of %d batches", n, batches)
	}
}

func TestRepairWALGap(t *testing.T) {
	dir, batches := buildDB(t)
	nums, _ := wal.Files(nil, filepath.Join(dir, walDirName))
	victim := filepath.Join(dir, walDirName, wal.FileName(nums[1]))
	data := mustRead(t, victim)
	ends := walRecordEnds(data)
	writeFile(t, victim, data[:ends[len(ends)/2]])
	wantOpenCorrupt(t, dir)
	rep := mustRepair(t, dir)
	if len(rep.SetAside) == 0 || rep.WALBytesDropped == 0 || len(rep.Lost) == 0 {
		t.Fatalf("report %+v", rep)
	}
	damaged, _ := filepath.Glob(filepath.Join(dir, walDirName, "*"+damagedSuffix))
	if len(damaged) == 0 {
		t.Fatal("nothing set aside in wal/")
	}
	db := openDB(t, dir, quietOptions())
	n := checkBatches(t, db, batches)
	if n <= 0 || n >= batches {
		t.Fatalf("after repair: %d of %d batches, want the prefix before the gap", n, batches)
	}
}

func TestRepairDamagedSegment(t *testing.T) {
	dir, _ := buildDB(t)
	m, err := manifest.Unmarshal("m", mustRead(t, filepath.Join(dir, manifest.Name)))
	if err != nil || len(m.Segments) == 0 {
		t.Fatalf("manifest: %v", err)
	}
	seg := filepath.Join(dir, segName(m.Segments[0].FileNum))
	data := mustRead(t, seg)
	data[40] ^= 0xff
	writeFile(t, seg, data)
	rep := mustRepair(t, dir)
	if len(rep.Missing) != 1 || !strings.Contains(strings.Join(rep.SetAside, " "), segName(m.Segments[0].FileNum)) {
		t.Fatalf("report %+v", rep)
	}
	if _, err := os.Stat(seg + damagedSuffix); err != nil {
		t.Fatalf("damaged segment not set aside: %v", err)
	}
	db := openDB(t, dir, quietOptions())
	if _, err := db.Verify(t.Context()); err != nil {
		t.Fatalf("verify after repair: %v", err)
	}
}

func TestRepairRefusesForeignDir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "notes.txt"), []byte("x"))
	before := dirSnapshot(t, dir)
	if _, err := Repair(dir, quietOptions()); !errors.Is(err, ErrNotDatabase) {
		t.Fatalf("Repair: %v, want ErrNotDatabase", err)
	}
	if d := diffSnapshots(before, dirSnapshot(t, dir)); d != "" {
		t.Fatalf("Repair changed a foreign dir: %s", d)
	}
}
