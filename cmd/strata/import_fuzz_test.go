package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratadb/strata/engine"
)

// FuzzImport feeds arbitrary bytes to import's format detection and its
// CSV, Parquet and line protocol readers: never a panic, and every point it
// says it wrote is stored or refused with a reason.
func FuzzImport(f *testing.F) {
	// Seeds: one valid file of each format, exported from a database.
	src := filepath.Join(f.TempDir(), "src")
	db, err := engine.Open(src, &engine.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	if err := db.Write([]engine.Point{
		{Measurement: "m", Tags: []engine.Tag{{Key: "h", Value: "a"}}, Fields: []engine.Field{{Key: "v", Value: engine.Float(1.5)}}, Time: 1},
		{Measurement: "m", Fields: []engine.Field{{Key: "s", Value: engine.String("x\"y")}}, Time: 2},
		{Measurement: "n", Fields: []engine.Field{{Key: "u", Value: engine.Uint(7)}}, Time: 3},
	}); err != nil {
		f.Fatal(err)
	}
	for _, format := range []string{"lp", "csv", "parquet"} {
		var b bytes.Buffer
		if _, err := export(context.Background(), db, engine.Selector{}, format, &b); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	db.Close()
	f.Add([]byte("measurement,field,time,kind,value\nm,v,1,int,x\n"))
	f.Add([]byte("PAR1garbagePAR1"))

	dst := filepath.Join(f.TempDir(), "dst")
	ddb, err := engine.Open(dst, &engine.Options{Sync: engine.SyncNever, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { ddb.Close() })
	file := filepath.Join(f.TempDir(), "in")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		res, _ := importFile(context.Background(), ddb, file)
		if res.written < 0 || res.rejectedCount < 0 || len(res.rejected) > importShowRejected {
			t.Fatalf("result %+v", res)
		}
	})
}
