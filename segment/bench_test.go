package segment

import (
	"bytes"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/testutil"
)

// BenchmarkWrite encodes the 1M-point IoT dataset: Writer.Add for every
// series, then Finish, into an in-memory filesystem.
func BenchmarkWrite(b *testing.B) {
	series := iotDataset(1000, 1000)
	points := 0
	for _, s := range series {
		points += len(s.samples)
	}
	fs := newMemFS()
	var size int64
	b.ReportAllocs()
	cpu0 := testutil.CPUTime()
	for b.Loop() {
		w, err := Create("/db/bench.seg", WriterOptions{FS: fs})
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range series {
			if err := w.Add(s.key, s.kind, s.samples); err != nil {
				b.Fatal(err)
			}
		}
		meta, err := w.Finish()
		if err != nil {
			b.Fatal(err)
		}
		size = meta.Size
	}
	reportPoints(b, points, size, testutil.CPUTime()-cpu0)
}

// BenchmarkRead iterates every sample of the IoT dataset's segment.
func BenchmarkRead(b *testing.B) {
	series := iotDataset(1000, 1000)
	fs := newMemFS()
	meta := writeSegment(b, fs, "/db/bench.seg", 0, series)
	r, err := Open(fs, "/db/bench.seg")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	points := int(meta.Samples)
	b.ReportAllocs()
	cpu0 := testutil.CPUTime()
	for b.Loop() {
		n := 0
		var sum float64
		for i := range r.NumSeries() {
			it := r.iter(r.Series(i), math.MinInt64, math.MaxInt64)
			for it.Next() {
				sum += it.At().Value.Float()
				n++
			}
			if err := it.Close(); err != nil {
				b.Fatal(err)
			}
		}
		if n != points {
			b.Fatalf("read %d points, want %d", n, points)
		}
	}
	reportPoints(b, points, meta.Size, testutil.CPUTime()-cpu0)
}

// BenchmarkReadBlock decodes every block into a reused slice.
func BenchmarkReadBlock(b *testing.B) {
	series := iotDataset(1000, 1000)
	fs := newMemFS()
	meta := writeSegment(b, fs, "/db/bench.seg", 0, series)
	r, err := Open(fs, "/db/bench.seg")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var buf []point.Sample
	b.ReportAllocs()
	cpu0 := testutil.CPUTime()
	for b.Loop() {
		for i := range r.NumSeries() {
			s := r.Series(i)
			for j := range s.Blocks {
				if buf, err = r.ReadBlock(s, j, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	reportPoints(b, int(meta.Samples), meta.Size, testutil.CPUTime()-cpu0)
}

// reportPoints reports throughput in points and raw megabytes (16 bytes, a
// time and a float, per point) per wall-clock second, points per CPU-second
// of the process (robust to other load on the machine), and the segment's
// bytes per point.
func reportPoints(b *testing.B, points int, size int64, cpu time.Duration) {
	total := float64(points) * float64(b.N)
	sec := b.Elapsed().Seconds()
	b.ReportMetric(total/sec, "points/s")
	b.ReportMetric(total*16/sec/1e6, "MB/s")
	if cpu > 0 {
		b.ReportMetric(total/cpu.Seconds(), "points/cpu-s")
	}
	b.ReportMetric(float64(size)/float64(points), "B/point")
}

// BenchmarkIndex reads the index of a segment of 200,000 one-sample
// series (a high-cardinality flush's shape, 19 MB raw) two ways: Load,
// which reads, validates and keeps it (what a read pays for a segment a
// flush or compaction opened), and Entries, which streams it through
// small buffers (what compaction and Verify pay). It reports the time per
// series entry and the bytes each way allocates.
func BenchmarkIndex(b *testing.B) {
	series := iotDataset(200_000, 1)
	slices.SortFunc(series, func(a, b testSeries) int { return bytes.Compare(a.key, b.key) })
	fs := newMemFS()
	meta := writeSegment(b, fs, "/db/bench.seg", 0, series)
	open := func(b *testing.B) *Reader {
		r, err := OpenLazy(fs, "/db/bench.seg", meta)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	b.Run("Load", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := open(b)
			if err := r.Load(); err != nil {
				b.Fatal(err)
			}
			r.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(series)), "ns/series")
	})
	b.Run("Entries", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := open(b)
			if err := readEntries(r); err != nil {
				b.Fatal(err)
			}
			if r.Loaded() {
				b.Fatal("Entries loaded the index")
			}
			r.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(series)), "ns/series")
	})
}
