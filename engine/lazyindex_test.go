package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLazyIndexDamaged damages the index of a segment that a flush
// opened without reading it: the first read of the segment's time range,
// of any kind, fails with a corruption error naming the segment and
// panics nowhere; a read that does not touch its time range still
// answers; compaction and Verify report the damage too.
func TestLazyIndexDamaged(t *testing.T) {
	dir := t.TempDir()
	opts := benchOptions()
	opts.DisableBackgroundCompaction = true
	opts.L0CompactionTrigger = 2 // the damaged segment and one more
	db := openDB(t, dir, opts)
	defer db.Close()
	var pts []Point
	for i := range 2000 {
		pts = append(pts, pt("m", []Tag{{Key: "dev", Value: fmt.Sprintf("d%04d", i)}}, "v", Float(float64(i)), int64(1000+i%7)))
	}
	mustWrite(t, db, pts...)
	mustFlush(t, db)
	names, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(names) != 1 {
		t.Fatalf("segments: %v", names)
	}
	data, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	// The footer starts with the index section's offset and length.
	foot := data[len(data)-41:]
	indexOff, indexLen := binary.LittleEndian.Uint64(foot), binary.LittleEndian.Uint64(foot[8:])
	data[indexOff+indexLen/2] ^= 0x40
	if err := os.WriteFile(names[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Newer samples, in the memtable only.
	mustWrite(t, db, pt("m", []Tag{{Key: "dev", Value: "d0000"}}, "v", Float(1), 50_000))

	ctx := context.Background()
	corrupt := func(what string, err error) {
		t.Helper()
		var ce *CorruptionError
		if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || !strings.HasSuffix(ce.Path, filepath.Base(names[0])) {
			t.Fatalf("%s: err = %v, want a corruption error naming %s", what, err, filepath.Base(names[0]))
		}
	}
	whole := Selector{Measurement: "m", Start: minTime, End: maxTime}
	_, err = db.Query(ctx, Query{Selector: whole})
	corrupt("query", err)
	_, err = db.Query(ctx, Query{Selector: whole, Agg: AggMean})
	corrupt("mean", err)
	_, err = db.Last(ctx, whole)
	corrupt("last", err)
	_, err = db.SeriesInfo(ctx, whole)
	corrupt("series info", err)
	for _, err := range db.Scan(ctx, whole) {
		corrupt("scan", err)
	}
	_, err = db.Verify(ctx)
	corrupt("verify", err)

	// The memtable's range alone: the segment is not read.
	res, err := db.Query(ctx, Query{Selector: Selector{Measurement: "m", Start: 40_000, End: maxTime}})
	if err != nil || len(res) != 1 || len(res[0].Samples) != 1 {
		t.Fatalf("query of the memtable's range: %v, %v", res, err)
	}

	mustFlush(t, db)
	if err := db.Compact(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Compact = %v, want ErrCorrupt", err)
	}
	// The damaged segment is still live and still reported.
	_, err = db.Query(ctx, Query{Selector: whole})
	corrupt("query after compaction", err)
}
