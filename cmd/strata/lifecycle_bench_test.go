package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/lineproto"
)

// baselineDB writes the 1M-point baseline into a database and closes it.
func baselineDB(b *testing.B) string {
	dir := filepath.Join(b.TempDir(), "db")
	db, err := engine.Open(dir, &engine.Options{Sync: engine.SyncNever, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	res, err := lineproto.Write(context.Background(), db, bytes.NewReader(baselineLP(b)), lineproto.Options{})
	if err != nil || res.Points != 1_000_000 {
		b.Fatalf("write baseline: %+v, %v", res, err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkExport measures the export of the 1M-point baseline, from a
// read-only open to the last byte, in each format.
func BenchmarkExport(b *testing.B) {
	dir := baselineDB(b)
	for _, format := range []string{"lp", "csv", "parquet"} {
		b.Run(format, func(b *testing.B) {
			b.ReportAllocs()
			var n int64
			for b.Loop() {
				db, err := engine.Open(dir, &engine.Options{ReadOnly: true, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				var cw countWriter
				if n, err = export(context.Background(), db, engine.Selector{}, format, &cw); err != nil || n != 1_000_000 {
					b.Fatalf("export: %d samples, %v", n, err)
				}
				db.Close()
				b.SetBytes(cw.n)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)

// BenchmarkImport measures the import of the exported baseline into a new
// database (default options: SyncAlways), from Open to Close, per format.
func BenchmarkImport(b *testing.B) {
	dir := baselineDB(b)
	db, err := engine.Open(dir, &engine.Options{ReadOnly: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	files := map[string]string{}
	for _, format := range []string{"lp", "csv", "parquet"} {
		files[format] = filepath.Join(b.TempDir(), "baseline."+format)
		f, err := os.Create(files[format])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := export(context.Background(), db, engine.Selector{}, format, f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	db.Close()
	for _, format := range []string{"lp", "csv", "parquet"} {
		b.Run(format, func(b *testing.B) {
			b.ReportAllocs()
			points := 0
			for b.Loop() {
				dst, err := engine.Open(filepath.Join(b.TempDir(), "dst"), &engine.Options{Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				res, err := importFile(context.Background(), dst, files[format])
				if err != nil || res.written != 1_000_000 || res.rejectedCount != 0 {
					b.Fatalf("import: %+v, %v", res, err)
				}
				if err := dst.Close(); err != nil {
					b.Fatal(err)
				}
				points += res.written
			}
			b.ReportMetric(float64(points)/b.Elapsed().Seconds(), "points/s")
		})
	}
}
