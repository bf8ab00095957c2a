package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stratadb/strata/internal/manifest"
	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/segment"
	"github.com/stratadb/strata/wal"
)

// dirSnapshot maps every path under dir (relative, directories with a
// trailing slash) to its bytes.
func dirSnapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	snap := make(map[string]string)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			snap[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(path)
		snap[rel] = string(b)
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// diffSnapshots describes how after differs from before, or "".
func diffSnapshots(before, after map[string]string) string {
	var out []string
	for p, b := range before {
		a, ok := after[p]
		switch {
		case !ok:
			out = append(out, "removed "+p)
		case a != b:
			out = append(out, fmt.Sprintf("changed %s (%d -> %d bytes)", p, len(b), len(a)))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			out = append(out, "created "+p)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// openUntouched opens dir (writable and read-only) and wants an error
// matching want from both, with not a byte of dir changed.
func openUntouched(t *testing.T, dir string, want error) {
	t.Helper()
	before := dirSnapshot(t, dir)
	for _, ro := range []bool{false, true} {
		opts := quietOptions()
		opts.ReadOnly = ro
		db, err := Open(dir, opts)
		if err == nil {
			db.Close()
			t.Fatalf("Open(ReadOnly=%v) succeeded, want %v", ro, want)
		}
		if !errors.Is(err, want) {
			t.Fatalf("Open(ReadOnly=%v): %v, want %v", ro, err, want)
		}
		if d := diffSnapshots(before, dirSnapshot(t, dir)); d != "" {
			t.Fatalf("Open(ReadOnly=%v) failing with %v changed the directory: %s", ro, err, d)
		}
	}
}

func TestOpenNotDatabase(t *testing.T) {
	f := func(name string, files map[string]string) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for p, data := range files {
				writeFile(t, filepath.Join(dir, p), []byte(data))
			}
			openUntouched(t, dir, ErrNotDatabase)
		})
	}
	f("names of strata files with other bytes", map[string]string{
		"000042.seg": "not a segment", "keep.tmp": "precious", "wal/00000009.wal": "some log", "MANIFEST.tmp": "x",
	})
	f("a foreign MANIFEST", map[string]string{"MANIFEST": "{\"json\": true}", "notes.txt": "hello"})
	f("home directory", map[string]string{".bashrc": "alias ll='ls -l'", "a/b/c.tmp": "1"})
	f("only an empty wal dir", map[string]string{"wal/README": "r"})
}

func TestOpenReadOnlyMissingOrEmpty(t *testing.T) {
	opts := quietOptions()
	opts.ReadOnly = true
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := Open(missing, opts); !errors.Is(err, ErrNotDatabase) {
		t.Fatalf("read-only open of a missing dir: %v, want ErrNotDatabase", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read-only open created the dir: %v", err)
	}
	empty := t.TempDir()
	if _, err := Open(empty, opts); !errors.Is(err, ErrNotDatabase) {
		t.Fatalf("read-only open of an empty dir: %v, want ErrNotDatabase", err)
	}
	if d := diffSnapshots(map[string]string{"./": ""}, dirSnapshot(t, empty)); d != "" {
		t.Fatalf("read-only open changed an empty dir: %s", d)
	}
}

func TestOpenCreatesOnlyInEmptyDir(t *testing.T) {
	for _, pre := range []map[string]string{nil, {"LOCK": ""}, {"LOCK": "", "MANIFEST.tmp": ""}, {"LOCK": "", "MANIFEST.tmp": "SM"}, {"LOCK": "", "MANIFEST.tmp": manifest.Magic + "\x02torn"}} {
		dir := t.TempDir()
		for p, d := range pre {
			writeFile(t, filepath.Join(dir, p), []byte(d))
		}
		db := openDB(t, dir, quietOptions())
		mustWrite(t, db, pt("m", nil, "v", Int(1), 1))
		db = reopen(t, db, dir, quietOptions())
		if got := samplesOf(t, mustQuery(t, db, rawAll("m"))); len(got) != 1 {
			t.Fatalf("after reopen: %v", got)
		}
		data, err := os.ReadFile(filepath.Join(dir, manifest.Name))
		if err != nil || !manifest.HasMagic(data) {
			t.Fatalf("a new database has no manifest: %v", err)
		}
	}
}

// buildDB writes batches of points (batch i: times 10i..10i+9 of series
// "m,k=a v" and "m,k=b v") with flushes and a compaction in between, and
// returns a crash copy holding data in segments and in several WAL files,
// with the batches it wrote.
func buildDB(t *testing.T) (dir string, batches int) {
	t.Helper()
	src := t.TempDir()
	opts := quietOptions()
	opts.WALSegmentBytes = 4 << 10
	opts.MemTableBytes = 1 << 30
	opts.DisableBackgroundCompaction = true
	db := openDB(t, src, opts)
	write := func(n int) {
		for range n {
			var pts []Point
			for j := range 10 {
				tm := int64(10*batches + j)
				pts = append(pts, pt("m", []Tag{{Key: "k", Value: "a"}}, "v", Int(tm), tm),
					pt("m", []Tag{{Key: "k", Value: "b"}}, "v", Float(float64(tm)), tm))
			}
			mustWrite(t, db, pts...)
			batches++
		}
	}
	write(20)
	mustFlush(t, db)
	write(20)
	mustFlush(t, db)
	mustCompact(t, db)
	write(15)
	mustFlush(t, db)
	mustDelete(t, db, Selector{Measurement: "m", Tags: []Tag{{Key: "k", Value: "b"}}, Start: 0, End: 5})
	write(60) // several WAL files
	return crashCopy(t, src), batches
}

// checkBatches queries dir's DB and returns the number of leading batches
// present, failing if any batch is partly present or a later batch is
// present without an earlier one. A query that reports ErrCorrupt (damage
// found in a block) returns -1: reported, not lost.
func checkBatches(t *testing.T, db *DB, batches int) int {
	t.Helper()
	res, err := db.Query(context.Background(), rawAll("m"))
	if errors.Is(err, ErrCorrupt) {
		return -1
	}
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	present := make(map[int64]int)
	for _, s := range res {
		for _, smp := range s.Samples {
			present[smp.Time]++
		}
	}
	n := 0
	for b := range batches {
		full, none := true, true
		for j := range 10 {
			tm := int64(10*b + j)
			want := 2
			if tm < 5 {
				want = 1 // deleted from k=b
			}
			if present[tm] == want {
				none = false
			} else {
				full = false
				if present[tm] != 0 {
					none = false
				}
			}
		}
		switch {
		case full && n == b:
			n++
		case full || !none:
			t.Fatalf("batch %d is partly present or follows a missing one (leading batches %d)", b, n)
		}
	}
	return n
}

// walRecordEnds returns the offsets just past each record of a WAL file
// (header: 20 bytes in version 1, 28 in version 2).
func walRecordEnds(data []byte) []int64 {
	var ends []int64
	off := int64(28)
	if len(data) > 4 && data[4] == 1 {
		off = 20
	}
	for off+13 <= int64(len(data)) {
		n := int64(binary.LittleEndian.Uint32(data[off:]))
		off += 13 + n
		if off > int64(len(data)) {
			break
		}
		ends = append(ends, off)
	}
	return ends
}

// TestOpenFaultSweep damages each file of a crashed database in turn
// (removed, emptied, cut short, cut at record boundaries) and opens it,
// writable and read-only. Open either returns every acknowledged batch or
// ErrCorrupt with not a byte changed; only damage to the last WAL file may
// lose batches, and then only a suffix of them (the torn tail).
func TestOpenFaultSweep(t *testing.T) {
	base, batches := buildDB(t)
	files := dirSnapshot(t, base)
	walNums, err := wal.Files(nil, filepath.Join(base, walDirName))
	if err != nil || len(walNums) < 3 {
		t.Fatalf("want several wal files, have %v (%v)", walNums, err)
	}
	lastWAL := filepath.Join(walDirName, wal.FileName(walNums[len(walNums)-1]))

	type damage struct {
		name  string
		apply func(path string, data []byte)
	}
	var cases []struct {
		file string
		d    damage
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if strings.HasSuffix(p, "/") {
			continue
		}
		data := []byte(files[p])
		ds := []damage{
			{"removed", func(path string, _ []byte) { os.Remove(path) }},
			{"emptied", func(path string, _ []byte) { os.WriteFile(path, nil, 0o644) }},
			{"cut to 3 bytes", func(path string, d []byte) { os.WriteFile(path, d[:min(3, len(d))], 0o644) }},
			{"cut in half", func(path string, d []byte) { os.WriteFile(path, d[:len(d)/2], 0o644) }},
			{"last byte cut", func(path string, d []byte) { os.WriteFile(path, d[:max(len(d)-1, 0)], 0o644) }},
			{"byte flipped", func(path string, d []byte) {
				c := bytes.Clone(d)
				if len(c) > 0 {
					c[len(c)/3] ^= 0x20
				}
				os.WriteFile(path, c, 0o644)
			}},
		}
		if strings.HasPrefix(p, walDirName+"/") {
			ends := walRecordEnds(data)
			for _, i := range []int{0, len(ends) / 2, len(ends) - 2} {
				if i >= 0 && i < len(ends) {
					end := ends[i]
					ds = append(ds, damage{fmt.Sprintf("cut at record boundary %d", end), func(path string, d []byte) { os.WriteFile(path, d[:end], 0o644) }})
				}
			}
		}
		for _, d := range ds {
			cases = append(cases, struct {
				file string
				d    damage
			}{p, d})
		}
	}

	for _, c := range cases {
		for _, ro := range []bool{true, false} {
			name := fmt.Sprintf("%s %s ro=%v", c.file, c.d.name, ro)
			dir := filepath.Join(t.TempDir(), "db")
			if err := os.CopyFS(dir, os.DirFS(base)); err != nil {
				t.Fatal(err)
			}
			c.d.apply(filepath.Join(dir, c.file), []byte(files[c.file]))
			before := dirSnapshot(t, dir)
			opts := quietOptions()
			opts.ReadOnly = ro
			db, err := Open(dir, opts)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s: Open: %v, want success or ErrCorrupt", name, err)
				}
				if d := diffSnapshots(before, dirSnapshot(t, dir)); d != "" {
					t.Fatalf("%s: Open failed (%v) and changed the directory: %s", name, err, d)
				}
				continue
			}
			n := checkBatches(t, db, batches)
			if n >= 0 && n != batches && c.file != lastWAL {
				t.Fatalf("%s: Open succeeded with %d of %d batches", name, n, batches)
			}
			if ro {
				if d := diffSnapshots(before, dirSnapshot(t, dir)); d != "" {
					t.Fatalf("%s: read-only Open changed the directory: %s", name, d)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatalf("%s: close: %v", name, err)
			}
		}
	}
}

func TestOpenMissingManifest(t *testing.T) {
	dir, batches := buildDB(t)
	if err := os.Remove(filepath.Join(dir, manifest.Name)); err != nil {
		t.Fatal(err)
	}
	openUntouched(t, dir, ErrCorrupt)
	// Without its LOCK file too: not even that is created.
	os.Remove(filepath.Join(dir, lockName))
	openUntouched(t, dir, ErrCorrupt)
	writeFile(t, filepath.Join(dir, manifest.Name), []byte("SMAN garbage"))
	openUntouched(t, dir, ErrCorrupt)

	// A database that never flushed, from before every database had a
	// manifest: the WAL holds the whole history, so it opens.
	src := t.TempDir()
	opts := quietOptions()
	opts.WALSegmentBytes = 4 << 10
	db := openDB(t, src, opts)
	for i := range 50 {
		mustWrite(t, db, pt("m", []Tag{{Key: "k", Value: "a"}}, "v", Int(int64(i)), int64(i)))
	}
	legacy := crashCopy(t, src)
	if err := os.Remove(filepath.Join(legacy, manifest.Name)); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{true, false} {
		o := quietOptions()
		o.ReadOnly = ro
		ldb, err := Open(legacy, o)
		if err != nil {
			t.Fatalf("legacy database (ro=%v): %v", ro, err)
		}
		if got := samplesOf(t, mustQuery(t, ldb, rawAll("m"))); len(got) != 50 {
			t.Fatalf("legacy database (ro=%v): %d samples, want 50", ro, len(got))
		}
		ldb.Close()
	}
	if _, err := os.Stat(filepath.Join(legacy, manifest.Name)); err != nil {
		t.Fatalf("the writable open of a legacy database wrote no manifest: %v", err)
	}
	_ = batches
}

func TestOpenUnlistedSegment(t *testing.T) {
	dir, _ := buildDB(t)
	db := openDB(t, dir, quietOptions())
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) == 0 {
		t.Fatal("no segments")
	}
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Unmarshal("m", mustRead(t, filepath.Join(dir, manifest.Name)))
	if err != nil {
		t.Fatal(err)
	}
	// Below the next file number, not listed, not obsolete: damage.
	free := uint64(0)
	writeFile(t, filepath.Join(dir, segName(free)), data)
	openUntouched(t, dir, ErrCorrupt)
	os.Remove(filepath.Join(dir, segName(free)))

	// At or above it: the leftover of an unfinished flush, removed.
	left := filepath.Join(dir, segName(m.NextFile+3))
	writeFile(t, left, data)
	writeFile(t, filepath.Join(dir, segName(m.NextFile+4)+".tmp"), data[:10])
	writeFile(t, filepath.Join(dir, "keep.tmp"), []byte("not ours"))
	db = openDB(t, dir, quietOptions())
	db.Close()
	if _, err := os.Stat(left); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("leftover segment not removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep.tmp")); err != nil {
		t.Fatalf("a file that is not the engine's was touched: %v", err)
	}
}

// TestOpenRemovesObsoleteAfterCrash crashes between a compaction's manifest
// edit and the removal of its inputs (a query holds them): the manifest
// lists them as obsolete, and Open removes them.
func TestOpenRemovesObsoleteAfterCrash(t *testing.T) {
	src := t.TempDir()
	opts := quietOptions()
	opts.DisableBackgroundCompaction = true
	db := openDB(t, src, opts)
	for i := range 5 {
		mustWrite(t, db, pt("m", nil, "v", Int(int64(i)), int64(i)))
		mustFlush(t, db)
	}
	snap, err := db.acquireSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	mustCompact(t, db)
	crash := crashCopy(t, src)
	db.releaseSnapshot(snap)
	segsBefore, _ := filepath.Glob(filepath.Join(crash, "*.seg"))
	db2 := openDB(t, crash, opts)
	if got := samplesOf(t, mustQuery(t, db2, rawAll("m"))); len(got) != 5 {
		t.Fatalf("%d samples, want 5", len(got))
	}
	db2.Close()
	segsAfter, _ := filepath.Glob(filepath.Join(crash, "*.seg"))
	if len(segsBefore) < 6 || len(segsAfter) != 1 {
		t.Fatalf("segments before open %d, after %d; want the 5 compacted inputs removed", len(segsBefore), len(segsAfter))
	}
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReadOnly(t *testing.T) {
	dir, batches := buildDB(t)
	// Tear the tail of the last WAL file: read-only ignores it, in place.
	nums, _ := wal.Files(nil, filepath.Join(dir, walDirName))
	last := filepath.Join(dir, walDirName, wal.FileName(nums[len(nums)-1]))
	f, err := os.OpenFile(last, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{9, 0, 0, 0, 1, 2})
	f.Close()
	before := dirSnapshot(t, dir)

	opts := quietOptions()
	opts.ReadOnly = true
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	// A writer may open beside it: no lock is held.
	w := openDB(t, filepath.Join(t.TempDir(), "other"), quietOptions())
	w.Close()
	if n := checkBatches(t, db, batches); n != batches {
		t.Fatalf("read-only open sees %d of %d batches", n, batches)
	}
	for name, err := range map[string]error{
		"Write":   db.Write([]Point{pt("m", nil, "v", Int(1), 1)}),
		"Delete":  db.Delete(context.Background(), Selector{Measurement: "m", Start: 0, End: 10}),
		"Flush":   db.Flush(),
		"Compact": db.Compact(),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Fatalf("%s on a read-only DB: %v, want ErrReadOnly", name, err)
		}
	}
	if ms, err := db.Measurements(context.Background()); err != nil || len(ms) != 1 || ms[0] != "m" {
		t.Fatalf("Measurements on a read-only DB: %v, %v", ms, err)
	}
	if last, err := db.Last(context.Background(), Selector{Measurement: "m"}); err != nil || len(last) != 2 || last[0].Samples[0].Time != int64(10*batches-1) {
		t.Fatalf("Last on a read-only DB: %v, %v", last, err)
	}
	rep, err := db.Verify(context.Background())
	if err != nil || rep.MemTableSamples == 0 || rep.Samples+rep.MemTableSamples < int64(2*10*batches-5) {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if d := diffSnapshots(before, dirSnapshot(t, dir)); d != "" {
		t.Fatalf("read-only open changed the directory: %s", d)
	}

	// Beside a writable open in this process, too.
	wdb := openDB(t, dir, quietOptions())
	rdb, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("read-only open beside a writer: %v", err)
	}
	rdb.Close()
	wdb.Close()
}

func TestMagicsMatchFormats(t *testing.T) {
	dir := t.TempDir()
	w, err := segment.Create(filepath.Join(dir, "x.seg"), segment.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add([]byte("m v"), KindInt, []Sample{{Time: 1, Value: Int(1)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if b := mustRead(t, filepath.Join(dir, "x.seg")); string(b[:4]) != segmentMagic {
		t.Fatalf("segment magic %q, engine expects %q", b[:4], segmentMagic)
	}
	l, err := wal.Open(filepath.Join(dir, "wal"), wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if b := mustRead(t, filepath.Join(dir, "wal", wal.FileName(1))); string(b[:4]) != walMagic {
		t.Fatalf("wal magic %q, engine expects %q", b[:4], walMagic)
	}
}

// TestReadOnlyBesideWriterProcess opens a database read-only, again and
// again, while another process writes to it, flushing and compacting all
// the while (so segments and WAL files vanish under the reader). Every open
// must serve a consistent snapshot: a prefix of the writer's batches, never
// a hole, and never fewer than the open before.
func TestReadOnlyBesideWriterProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), writerDirEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("writer process: %q %v; stderr: %s", lines.Text(), lines.Err(), stderr.String())
	}

	opts := quietOptions()
	opts.ReadOnly = true
	check := func(when string) int {
		t.Helper()
		db, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("%s: read-only open: %v", when, err)
		}
		defer db.Close()
		res := mustQuery(t, db, rawAll("w"))
		if len(res) != 1 {
			t.Fatalf("%s: %d series", when, len(res))
		}
		ss := res[0].Samples
		for i, s := range ss {
			if s.Time != int64(i) || s.Value.Int() != int64(i) {
				t.Fatalf("%s: sample %d is %d=%v: the snapshot has a hole or a foreign value", when, i, s.Time, s.Value)
			}
		}
		if len(ss)%writerBatch != 0 {
			t.Fatalf("%s: %d samples: a write is half visible", when, len(ss))
		}
		return len(ss) / writerBatch
	}
	// Read until the writer has gone well past where it was, so flushes and
	// compactions ran under the reads.
	prev, opens := 0, 0
	for ; opens < 40 || (prev < 600 && opens < 5000); opens++ {
		n := check(fmt.Sprintf("open %d", opens))
		if n < prev {
			t.Fatalf("open %d sees %d batches, the one before saw %d", opens, n, prev)
		}
		prev = n
	}
	stdin.Close()
	if !lines.Scan() {
		t.Fatalf("writer process ended without a count: %v; stderr: %s", lines.Err(), stderr.String())
	}
	var total, flushes, compactions int
	if _, err := fmt.Sscanf(lines.Text(), "done %d %d %d", &total, &flushes, &compactions); err != nil {
		t.Fatalf("writer said %q: %v", lines.Text(), err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("writer process: %v; stderr: %s", err, stderr.String())
	}
	if n := check("after the writer closed"); n != total || n < prev {
		t.Fatalf("after the writer closed: %d batches, the writer wrote %d (last open saw %d)", n, total, prev)
	}
	if flushes < 5 || compactions < 1 {
		t.Fatalf("the writer flushed %d times and compacted %d times: too little churn under the reads", flushes, compactions)
	}
	t.Logf("writer wrote %d batches (%d flushes, %d compactions); %d read-only opens saw up to %d while it ran", total, flushes, compactions, opens, prev)
}

// TestOpenFormatV1Database opens a database written by the release before
// manifest version 2 and WAL format version 2 (checked in under testdata:
// two segments, one a compaction output, and 100 writes left in the WAL as
// a crash leaves them), read-only and then writable.
func TestOpenFormatV1Database(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	if err := os.CopyFS(dir, os.DirFS("testdata/format_v1_db")); err != nil {
		t.Fatal(err)
	}
	if m := mustRead(t, filepath.Join(dir, manifest.Name)); m[4] != manifest.FormatVersionV1 {
		t.Fatalf("fixture manifest version %d", m[4])
	}
	check := func(db *DB, n int) {
		t.Helper()
		got := samplesOf(t, mustQuery(t, db, rawAll("m")))
		if len(got) != n {
			t.Fatalf("%d samples, want %d", len(got), n)
		}
		for i, s := range got {
			if s.Time != int64(i) || s.Value.Int() != int64(i) {
				t.Fatalf("sample %d is %d=%v", i, s.Time, s.Value)
			}
		}
	}
	ro := quietOptions()
	ro.ReadOnly = true
	before := dirSnapshot(t, dir)
	db, err := Open(dir, ro)
	if err != nil {
		t.Fatal(err)
	}
	check(db, 400)
	db.Close()
	if d := diffSnapshots(before, dirSnapshot(t, dir)); d != "" {
		t.Fatalf("read-only open changed the old database: %s", d)
	}
	db = openDB(t, dir, quietOptions())
	check(db, 400)
	mustWrite(t, db, pt("m", []Tag{{Key: "k", Value: "a"}}, "v", Int(400), 400))
	db = reopen(t, db, dir, quietOptions())
	check(db, 401)
	if m := mustRead(t, filepath.Join(dir, manifest.Name)); m[4] != manifest.FormatVersion {
		t.Fatalf("manifest version %d after a writable open, want %d", m[4], manifest.FormatVersion)
	}
}

// TestReadOnlyRetriesWhenFilesVanish compacts the database (removing
// the segments the read-only open's manifest names) just as the read-only
// open is about to open its first segment, and again as it opens its
// first WAL file: the open starts over from the new manifest and serves
// every sample.
func TestReadOnlyRetriesWhenFilesVanish(t *testing.T) {
	for _, when := range []string{segSuffix, ".wal"} {
		dir := t.TempDir()
		wopts := quietOptions()
		wopts.DisableBackgroundCompaction = true
		w := openDB(t, dir, wopts)
		for i := range 6 {
			mustWrite(t, w, pt("m", nil, "v", Int(int64(i)), int64(i)))
			mustFlush(t, w)
		}
		mustWrite(t, w, pt("m", nil, "v", Int(6), 6)) // in the WAL
		var fired atomic.Bool
		ro := quietOptions()
		ro.ReadOnly = true
		ro.fs = vfs.Inject(vfs.Default, func(op vfs.Op, name string) error {
			if op == vfs.OpOpen && strings.HasSuffix(name, when) && !fired.Swap(true) {
				if when == segSuffix {
					mustCompact(t, w) // removes the inputs: no reader holds them
				} else {
					mustFlush(t, w) // moves the WAL start and removes the file
				}
			}
			return nil
		})
		db, err := Open(dir, ro)
		if err != nil {
			t.Fatalf("%s: read-only open: %v", when, err)
		}
		if !fired.Load() {
			t.Fatalf("%s: the hook never ran", when)
		}
		if got := samplesOf(t, mustQuery(t, db, rawAll("m"))); len(got) != 7 {
			t.Fatalf("%s: %d samples, want 7", when, len(got))
		}
		db.Close()
	}
}
