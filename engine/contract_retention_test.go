package engine_test

import (
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// An overwritten value never comes back: not after its newer value expires
// and compaction drops it, not after an operator raises the retention.
func TestContractRetentionNeverResurrects(t *testing.T) {
	dir := t.TempDir()
	open := func(retention int64) *engine.DB {
		t.Helper()
		o := cOpts(1000)
		o.Retention = time.Duration(retention)
		db, err := engine.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open(0)
	cWrite(cp("m", "f", engine.Float(1), 100), cp("m", "f", engine.Float(9), 900))(t, db) // A beside newer data
	cFlush(t, db)
	cWrite(cp("m", "f", engine.Float(2), 100))(t, db) // B overwrites A
	cFlush(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(500) // cutoff 500: t=100 expired
	cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}}, "m f: 900=float(9)\n")
	cCompact(t, db)
	cWantQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}}, "m f: 900=float(9)\n")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(0) // retention raised: t=100 may be gone or B, never A
	defer db.Close()
	got := cFmt(cQuery(t, db, engine.Query{Selector: engine.Selector{Measurement: "m"}}))
	if got != "m f: 900=float(9)\n" && got != "m f: 100=float(2) 900=float(9)\n" {
		t.Errorf("after raising the retention: %q; the overwritten value came back", got)
	}
}
