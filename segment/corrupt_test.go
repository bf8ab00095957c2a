package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
)

var update = flag.Bool("update", false, "rewrite testdata/v4.seg and the fuzz seeds")

// fixtureSeries is the content of testdata/v1.seg, v2.seg and v3.seg: every kind, several
// blocks per series (block size 4), decimal and Gorilla floats, and a
// string series that zstd compresses.
func fixtureSeries() []testSeries {
	ts := func(start, step int64, vals ...point.Value) []point.Sample {
		out := make([]point.Sample, len(vals))
		for i, v := range vals {
			out[i] = point.Sample{Time: start + int64(i)*step, Value: v}
		}
		return out
	}
	var decimals, gorilla, ints, uints, bools, logs []point.Value
	for i := range 10 {
		decimals = append(decimals, point.Float(20+float64(i*37%11)/100))
		gorilla = append(gorilla, point.Float(float64(i)*1.1e-7+1/3.0))
		ints = append(ints, point.Int(int64(i*i)-40))
		uints = append(uints, point.Uint(1<<63+uint64(i)))
		bools = append(bools, point.Bool(i%3 == 0))
	}
	for i := range 4 {
		logs = append(logs, point.String(strings.Repeat(fmt.Sprintf("disk %d is full; ", i%2), 12)))
	}
	return []testSeries{
		{key: []byte("cpu,host=a usage"), kind: point.KindFloat, samples: ts(1_700_000_000_000_000_000, 1e9, decimals...)},
		{key: []byte("cpu,host=a usage_raw"), kind: point.KindFloat, samples: ts(1_700_000_000_000_000_000, 1e9+7, gorilla...)},
		{key: []byte("disk,host=a free"), kind: point.KindUint, samples: ts(-5_000, 1_000, uints...)},
		{key: []byte("disk,host=a ops"), kind: point.KindInt, samples: ts(0, 1, ints...)},
		{key: []byte("log,host=a msg"), kind: point.KindString, samples: ts(100, 3, logs...)},
		{key: []byte("net,host=a up"), kind: point.KindBool, samples: ts(100, 3, bools...)},
	}
}

const (
	fixtureBlockSamples = 4
	// fixtureInlineBytes makes v2.seg and v3.seg hold inline and stored
	// blocks.
	fixtureInlineBytes = 30
)

// fixtureBytes writes the fixture series in the current format and
// returns the file.
func fixtureBytes(t testing.TB) []byte {
	fs := newMemFS()
	w, err := Create("/db/f.seg", WriterOptions{FS: fs, BlockSamples: fixtureBlockSamples, InlineBytes: fixtureInlineBytes})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range fixtureSeries() {
		if err := w.Add(s.key, s.kind, s.samples); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return fs.bytes(t, "/db/f.seg")
}

// TestFormatV1Fixture reads the checked-in version 1 segment (no inline
// blocks), written before version 2; readers keep reading it.
func TestFormatV1Fixture(t *testing.T) {
	stored, inline := checkFixture(t, "testdata/v1.seg", 1)
	if stored["zstd"] == 0 || stored["raw"] == 0 || inline != 0 {
		t.Fatalf("v1 fixture has %v stored and %d inline blocks", stored, inline)
	}
}

// TestFormatV2Fixture reads the checked-in version 2 segment (float sums
// in time order, no exact partial sums); readers keep reading it.
func TestFormatV2Fixture(t *testing.T) {
	stored, inline := checkFixture(t, "testdata/v2.seg", 2)
	if stored["zstd"] == 0 || stored["raw"] == 0 || inline == 0 {
		t.Fatalf("v2 fixture has %v stored and %d inline blocks", stored, inline)
	}
}

// TestFormatV3Fixture reads the checked-in version 3 segment (exact float
// sums, no rollup blocks), so a format change that breaks old files fails
// here.
func TestFormatV3Fixture(t *testing.T) {
	stored, inline := checkFixture(t, "testdata/v3.seg", 3)
	if stored["zstd"] == 0 || stored["raw"] == 0 || inline == 0 {
		t.Fatalf("v3 fixture has %v stored and %d inline blocks", stored, inline)
	}
}

// TestFormatV4Fixture reads the checked-in version 4 segment, so a future
// format change that breaks old files fails here. Regenerate only with a
// format version bump (go test -run TestFormatV4Fixture -update), keeping
// the older fixtures.
func TestFormatV4Fixture(t *testing.T) {
	if *update {
		data := fixtureBytes(t)
		if err := os.WriteFile("testdata/v4.seg", data, 0o644); err != nil {
			t.Fatal(err)
		}
		writeSeed(t, "FuzzReader", "v4", data)
		small := newMemFS()
		writeSegment(t, small, "/db/s.seg", 2, []testSeries{
			{key: []byte("m f"), kind: point.KindFloat, samples: []point.Sample{{Time: 1, Value: point.Float(1.5)}, {Time: 2, Value: point.Float(2.25)}, {Time: 9, Value: point.Float(-1)}}},
			{key: []byte("m s"), kind: point.KindString, samples: []point.Sample{{Time: -1, Value: point.String("on")}}},
		})
		writeSeed(t, "FuzzReader", "small", small.bytes(t, "/db/s.seg"))
		empty := newMemFS()
		writeSegment(t, empty, "/db/e.seg", 0, nil)
		writeSeed(t, "FuzzReader", "empty", empty.bytes(t, "/db/e.seg"))
		for _, v := range []string{"v1", "v2", "v3", "v4"} {
			old, err := os.ReadFile("testdata/" + v + ".seg")
			if err != nil {
				t.Fatal(err)
			}
			writeRawSeeds(t, v, old)
		}
	}
	stored, inline := checkFixture(t, "testdata/v4.seg", 4)
	if stored["zstd"] == 0 || stored["raw"] == 0 || inline == 0 {
		t.Fatalf("v4 fixture has %v stored and %d inline blocks", stored, inline)
	}
	if data, err := os.ReadFile("testdata/v4.seg"); err != nil || !bytes.Equal(data, fixtureBytes(t)) {
		t.Fatalf("the writer no longer writes testdata/v4.seg (err %v): bump the format version", err)
	}
}

// TestCopyOldBlocks compacts the version 1 and 2 fixtures into a version 3
// segment by copying every stored block: float blocks, which lack exact
// sums in the old formats, get them.
func TestCopyOldBlocks(t *testing.T) {
	for _, v := range []string{"v1", "v2"} {
		data, err := os.ReadFile("testdata/" + v + ".seg")
		if err != nil {
			t.Fatal(err)
		}
		fs := newMemFS()
		fs.put("/db/old.seg", data)
		r, err := Open(fs, "/db/old.seg")
		if err != nil {
			t.Fatal(err)
		}
		w, err := Create("/db/new.seg", WriterOptions{FS: fs, BlockSamples: fixtureBlockSamples, InlineBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		copied := 0
		for i := range r.NumSeries() {
			s := r.Series(i)
			for b := range s.Blocks {
				if s.Blocks[b].Inline() {
					samples, err := r.ReadBlock(s, b, nil)
					if err != nil {
						t.Fatal(err)
					}
					if err := w.Add(s.Key, s.Kind, samples); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if s.Kind == point.KindFloat && s.Blocks[b].Partial != nil {
					t.Fatalf("%s: a partial sum in an old block", v)
				}
				if err := w.CopyBlock(s.Key, s.Kind, r, s, b); err != nil {
					t.Fatal(err)
				}
				copied++
			}
		}
		if _, err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		r.Close()
		out := openAndCheck(t, fs, "/db/new.seg", fixtureSeries())
		checkStats(t, out) // every float block has its exact sum
		if copied == 0 || out.tab().version != formatVersion {
			t.Fatalf("%s: %d blocks copied, version %d", v, copied, out.tab().version)
		}
	}
}

// checkFixture reads a fixture file of the given version, checks its
// content and stats and that it exercises both float codecs, and counts
// its stored blocks by framing and its inline blocks.
func checkFixture(t *testing.T, name string, version byte) (stored map[string]int, inline int) {
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if data[4] != version {
		t.Fatalf("%s is version %d, want %d", name, data[4], version)
	}
	fs := newMemFS()
	fs.put("/db/f.seg", data)
	r := openAndCheck(t, fs, "/db/f.seg", fixtureSeries())
	checkStats(t, r)
	stored = map[string]int{}
	codecs := map[byte]bool{}
	for i := range r.NumSeries() {
		s := r.Series(i)
		for _, b := range s.Blocks {
			var raw []byte
			switch {
			case b.inline != nil:
				inline++
				raw = b.inline
			case data[b.Offset]&flagZstd != 0:
				stored["zstd"]++
				continue
			default:
				stored["raw"]++
				raw = rawOf(t, data[b.Offset:b.Offset+int64(b.Length)])
			}
			if s.Kind == point.KindFloat {
				codecs[floatCodecOf(raw)] = true
			}
		}
	}
	if !codecs[floatDecimal] || !codecs[floatGorilla] {
		t.Fatalf("%s: float codecs %v", name, codecs)
	}
	return stored, inline
}

func rawOf(t *testing.T, stored []byte) []byte {
	var sc blockScratch
	raw, err := unframe(stored, MaxBlockRaw, &sc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// floatCodecOf returns the float codec byte of a raw block.
func floatCodecOf(raw []byte) byte {
	_, n1 := binary.Uvarint(raw[1:])
	tsLen, n2 := binary.Uvarint(raw[1+n1:])
	return raw[1+n1+n2+int(tsLen)]
}

// writeRawSeeds stores the raw index and one raw block of each series of
// the fixture as seeds of FuzzParseIndex and FuzzDecodeBlock.
func writeRawSeeds(t *testing.T, version string, data []byte) {
	fs := newMemFS()
	fs.put("/db/f.seg", data)
	r, err := Open(fs, "/db/f.seg")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	writeSeed(t, "FuzzParseIndex", version, r.tab().raw)
	for i := range r.NumSeries() {
		s := r.Series(i)
		b := s.Blocks[len(s.Blocks)-1]
		raw := b.inline
		if raw == nil {
			raw = rawOf(t, data[b.Offset:b.Offset+int64(b.Length)])
		}
		writeSeed(t, "FuzzDecodeBlock", fmt.Sprintf("%s-%d-%s", version, i, s.Kind), raw)
	}
}

// writeSeed stores data as a seed of fuzz target name in Go's corpus format.
func writeSeed(t *testing.T, name, file string, data []byte) {
	dir := filepath.Join("testdata", "fuzz", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
	if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// openData opens data as the segment /db/c.seg.
func openData(data []byte) (*Reader, error) {
	fs := newMemFS()
	fs.put("/db/c.seg", data)
	return Open(fs, "/db/c.seg")
}

// openAndReadAll opens data as a segment and reads every sample.
func openAndReadAll(data []byte) ([]testSeries, error) {
	r, err := openData(data)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return readAll(r)
}

// checkCorrupt fails unless err is a *base.CorruptionError for the test
// file matching base.ErrCorrupt.
func checkCorrupt(t *testing.T, what string, err error) {
	t.Helper()
	var ce *base.CorruptionError
	if !errors.Is(err, base.ErrCorrupt) || !errors.As(err, &ce) || ce.Path != "/db/c.seg" {
		t.Fatalf("%s: err = %v, want a CorruptionError for /db/c.seg", what, err)
	}
}

func TestCorruptionEveryByte(t *testing.T) {
	good := fixtureBytes(t)
	want := fixtureSeries()
	t.Logf("flipping each of %d bytes", len(good))
	for i := range good {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			data := bytes.Clone(good)
			data[i] ^= mask
			got, err := openAndReadAll(data)
			if err != nil {
				checkCorrupt(t, fmt.Sprintf("byte %d ^ %#x", i, mask), err)
				continue
			}
			if d := diffSeries(want, got); d != "" {
				t.Fatalf("byte %d ^ %#x: read wrong data without an error: %s", i, mask, d)
			}
		}
		// Read as columns too, from the Reader and through a BlockReader.
		data := bytes.Clone(good)
		data[i] ^= 0x01
		for _, window := range []int{0, 1 << 10} {
			got, err := openAndReadColumns(data, window)
			if err != nil {
				checkCorrupt(t, fmt.Sprintf("columns, window %d, byte %d ^ 0x01", window, i), err)
				continue
			}
			if d := diffSeries(want, got); d != "" {
				t.Fatalf("columns, window %d, byte %d ^ 0x01: read wrong data without an error: %s", window, i, d)
			}
		}
	}
}

// openAndReadColumns opens data as a segment and reads every block with
// ReadColumns: the Reader's with window 0, else a BlockReader's.
func openAndReadColumns(data []byte, window int) ([]testSeries, error) {
	r, err := openData(data)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	read := r.ReadColumns
	if window > 0 {
		read = r.NewBlockReader(window).ReadColumns
	}
	var out []testSeries
	for i := range r.NumSeries() {
		s := r.Series(i)
		var cols point.Columns
		for b := range s.Blocks {
			n := cols.Len()
			if err := read(s, b, &cols); err != nil {
				if cols.Len() != n || len(cols.Bits) > n || len(cols.Strings) > n {
					return nil, fmt.Errorf("failed read of block %d changed the columns", b)
				}
				return nil, err
			}
		}
		ts := testSeries{key: bytes.Clone(s.Key), kind: s.Kind}
		if cols.Len() > 0 {
			ts.samples = cols.Samples(s.Kind)
		}
		out = append(out, ts)
	}
	return out, nil
}

func TestCorruptionTruncated(t *testing.T) {
	good := fixtureBytes(t)
	for n := range len(good) {
		_, err := openAndReadAll(good[:n])
		checkCorrupt(t, fmt.Sprintf("truncated to %d bytes", n), err)
	}
	// Trailing garbage moves the footer: also an error.
	_, err := openAndReadAll(append(bytes.Clone(good), 0))
	checkCorrupt(t, "one byte appended", err)
}

func TestCorruptionCauses(t *testing.T) {
	good := fixtureBytes(t)
	end := len(good)
	reseal := func(data []byte) { // recompute the footer's checksum
		f := data[end-footerLen:]
		binary.LittleEndian.PutUint32(f[33:], crc32.Checksum(f[:33], castagnoli))
	}
	cases := []struct {
		name   string
		damage func([]byte)
		cause  error
		offset int64
	}{
		{"header magic", func(d []byte) { d[0] = 'X' }, ErrMagic, 0},
		{"header version", func(d []byte) { d[4] = 9 }, ErrVersion, 4},
		{"footer magic", func(d []byte) { d[end-1] ^= 1 }, ErrMagic, int64(end - footerLen)},
		{"footer version", func(d []byte) { d[end-footerLen+32] = 9 }, ErrVersion, int64(end - footerLen)},
		{"footer checksum", func(d []byte) { d[end-footerLen] ^= 1 }, ErrChecksum, int64(end - footerLen)},
		{"index checksum", func(d []byte) {
			off := binary.LittleEndian.Uint64(d[end-footerLen:])
			d[off+3] ^= 1
		}, ErrChecksum, -1},
		{"bloom checksum", func(d []byte) {
			off := binary.LittleEndian.Uint64(d[end-footerLen+16:])
			d[off+8] ^= 1
		}, ErrChecksum, -1},
		{"block checksum", func(d []byte) { d[headerLen+2] ^= 1 }, ErrChecksum, headerLen},
		{"section offsets", func(d []byte) { d[end-footerLen] ^= 1; reseal(d) }, nil, int64(end - footerLen)},
	}
	for _, c := range cases {
		data := bytes.Clone(good)
		c.damage(data)
		_, err := openAndReadAll(data)
		checkCorrupt(t, c.name, err)
		if c.cause != nil && !errors.Is(err, c.cause) {
			t.Errorf("%s: err = %v, want cause %v", c.name, err, c.cause)
		}
		var ce *base.CorruptionError
		errors.As(err, &ce)
		if c.offset >= 0 && ce.Offset != c.offset {
			t.Errorf("%s: offset %d, want %d", c.name, ce.Offset, c.offset)
		}
	}
}

// FuzzReader opens arbitrary bytes as a segment and reads everything it
// can. It must never panic, and a damaged file must give ErrCorrupt.
func FuzzReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		fs := newMemFS()
		fs.put("/db/c.seg", data)
		withStreaming(t, 64)
		r, err := Open(fs, "/db/c.seg")
		if err != nil {
			checkCorrupt(t, "open", err)
			// Opened lazily, as flushes and compactions open their
			// outputs, the damage shows when the index is read.
			if lr, err := OpenLazy(fs, "/db/c.seg", Meta{Size: int64(len(data))}); err != nil {
				checkCorrupt(t, "open lazily", err)
			} else {
				if err := readEntries(lr); err != nil {
					checkCorrupt(t, "entries", err)
				}
				if err := lr.Load(); err != nil {
					checkCorrupt(t, "load", err)
				}
				lr.Close()
			}
			return
		}
		defer r.Close()
		lr, err := OpenLazy(fs, "/db/c.seg", r.Meta())
		if err != nil {
			t.Fatalf("open lazily what Open opened: %v", err)
		}
		defer lr.Close()
		it, err := lr.Entries()
		if err != nil {
			t.Fatalf("entries of what Open opened: %v", err)
		}
		var e SeriesIndex
		for i := 0; ; i++ {
			ok, err := it.Next(&e)
			if err != nil || ok != (i < r.NumSeries()) || ok && !sameEntry(&e, r.Series(i)) {
				t.Fatalf("entry %d: %v, %v; want %v", i, ok, err, i < r.NumSeries())
			}
			if !ok {
				break
			}
		}
		for i := range r.NumSeries() {
			s := r.Series(i)
			if got, ok := r.Find(s.Key); !ok || !reflect.DeepEqual(got, s) {
				t.Fatalf("Find(%q) = %v, %v", s.Key, got, ok)
			}
			it := r.iter(s, s.MinTime(), s.MaxTime())
			for it.Next() {
				it.At()
			}
			if err := it.Close(); err != nil {
				checkCorrupt(t, "iterate", err)
			}
			var cols point.Columns
			for b := range s.Blocks {
				if _, err := r.ReadBlock(s, b, nil); err != nil {
					checkCorrupt(t, "read block", err)
				}
				if err := r.ReadColumns(s, b, &cols); err != nil {
					checkCorrupt(t, "read block columns", err)
				}
			}
		}
	})
}

// TestUnorderedBlockRefused decodes raw blocks, checksums aside, whose
// timestamps are not strictly increasing: both decoders refuse them and
// leave what they append to as it was.
func TestUnorderedBlockRefused(t *testing.T) {
	for _, kind := range []point.Kind{point.KindFloat, point.KindInt, point.KindString} {
		for _, times := range [][]int64{
			{10, 10},
			{10, 20, 15, 30},
			append(seqTimes(0, 1, 200), 199), // in the second packed chunk
			{math.MaxInt64 - 1, math.MaxInt64, math.MinInt64},
		} {
			vals := make([]uint64, len(times))
			strs := make([]string, len(times))
			for i := range vals {
				vals[i], strs[i] = uint64(i), "s"
			}
			var sc blockScratch
			raw := bytes.Clone(appendRawBlock(&sc, kind, times, vals, strs))
			bm := &BlockMeta{Count: len(times), MinTime: times[0], MaxTime: times[len(times)-1]}
			samples, err := decodeBlock([]point.Sample{{Time: 1}}, raw, kind, bm, &sc)
			if err == nil || len(samples) != 1 {
				t.Errorf("kind %v, times %v: decodeBlock gave %d samples, err %v", kind, times[:2], len(samples), err)
			}
			ts, vs, ss, err := decodeColumns([]int64{1}, []uint64{1}, []string{"x"}, raw, kind, bm)
			if err == nil || len(ts) != 1 || len(vs) != 1 || len(ss) != 1 {
				t.Errorf("kind %v, times %v: decodeColumns gave %d times, err %v", kind, times[:2], len(ts), err)
			}
		}
	}
}
