package bench_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"

	"github.com/stratadb/strata/bench"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/testutil"
)

// scaleShapes are the cardinality shapes of the scale comparison: the
// baseline's 1,000 series and many series with few points each.
var scaleShapes = []struct{ series, points int }{
	{1_000, 1_000},
	{200_000, 10},
	{1_000_000, 3},
}

// BenchmarkScale inserts the IoT dataset of each shape into strata
// (SyncNever) and into the Prometheus TSDB head (refs cached per series,
// one appender commit per batch of 10,000), from before Open to after
// Close, in one process so that their ratios come from one run. strata
// runs three ways: Write with the dataset's tag slice per device
// (strata), its Appender with refs cached per series as Prometheus' are
// (strata-appender), and Write with a fresh tag slice per point, as a
// decoder makes them (strata-freshtags):
//
//	go test -run '^$' -bench Scale -count 5 ./bench/ | tee scale.txt
//
// It reports points/s, Go heap allocated per point and bytes on disk per
// point. Peak RSS needs a process per engine: see the bench command.
func BenchmarkScale(b *testing.B) {
	for _, sh := range scaleShapes {
		ds, err := bench.IoT(sh.series*sh.points, sh.series, 1)
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range []string{"strata", "strata-appender", "strata-freshtags", "prometheus"} {
			insert := scaleInserts[name]
			b.Run(fmt.Sprintf("%s/series=%d/points=%d", name, sh.series, sh.points), func(b *testing.B) {
				var dir string
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for b.Loop() {
					dir = b.TempDir()
					if err := insert(dir, ds); err != nil {
						b.Fatal(err)
					}
				}
				runtime.ReadMemStats(&after)
				n := float64(b.N * ds.Len())
				b.ReportMetric(n/b.Elapsed().Seconds(), "points/s")
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "alloc-B/point")
				b.ReportMetric(float64(testutil.DirBytes(b, dir))/float64(ds.Len()), "disk-B/point")
			})
		}
	}
}

// scaleInserts are BenchmarkScale's inserts by engine name.
var scaleInserts = map[string]func(dir string, ds *bench.Dataset) error{
	"strata": insertStrata, "strata-appender": insertStrataAppender,
	"strata-freshtags": insertStrataFreshTags, "prometheus": insertPrometheus,
}

// rssChildEnv names the variable that makes BenchmarkScaleRSS the child
// that runs one insert: "engine series points".
const rssChildEnv = "STRATA_SCALE_RSS_CHILD"

// BenchmarkScaleRSS measures the peak resident memory (VmHWM) of
// BenchmarkScale's inserts at 200k and 1M series, each in a child process
// of its own (this test binary again), since a process' peak cannot be
// reset between engines. It reports the child's peak and its resident
// memory once the dataset, which every child builds alike, is made:
//
//	go test -run '^$' -bench ScaleRSS -benchtime 1x -count 3 ./bench/
func BenchmarkScaleRSS(b *testing.B) {
	if spec := os.Getenv(rssChildEnv); spec != "" {
		scaleRSSChild(b, spec)
		return
	}
	for _, sh := range scaleShapes[1:] {
		for _, eng := range []string{"strata", "strata-appender", "prometheus"} {
			b.Run(fmt.Sprintf("%s/series=%d/points=%d", eng, sh.series, sh.points), func(b *testing.B) {
				var base, peak float64
				for b.Loop() {
					cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkScaleRSS$", "-test.benchtime=1x")
					cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d", rssChildEnv, eng, sh.series, sh.points))
					out, err := cmd.CombinedOutput()
					if err != nil {
						b.Fatalf("child: %v\n%s", err, out)
					}
					_, line, ok := strings.Cut(string(out), "rss-child ")
					if !ok {
						b.Fatalf("child printed no figures:\n%s", out)
					}
					if _, err := fmt.Sscanf(line, "%g %g", &base, &peak); err != nil {
						b.Fatalf("child figures %q: %v", line, err)
					}
				}
				b.ReportMetric(peak/(1<<20), "peak-RSS-MiB")
				b.ReportMetric(base/(1<<20), "dataset-RSS-MiB")
			})
		}
	}
}

// scaleRSSChild runs one insert of spec and prints the resident memory
// with the dataset made and the peak.
func scaleRSSChild(b *testing.B, spec string) {
	var eng string
	var series, points int
	if _, err := fmt.Sscanf(spec, "%s %d %d", &eng, &series, &points); err != nil {
		b.Fatalf("%s=%q: %v", rssChildEnv, spec, err)
	}
	insert := scaleInserts[eng]
	if insert == nil {
		b.Fatalf("%s: no engine %q", rssChildEnv, eng)
	}
	ds, err := bench.IoT(series*points, series, 1)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	base := bench.PeakRSS()
	if err := insert(b.TempDir(), ds); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("rss-child %d %d\n", base, bench.PeakRSS())
	runtime.KeepAlive(ds)
}

func insertStrata(dir string, ds *bench.Dataset) error {
	db, err := engine.Open(dir, &engine.Options{Sync: engine.SyncNever, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	for batch := range ds.Batches(10_000) {
		if err := db.Write(batch); err != nil {
			db.Close()
			return err
		}
	}
	return db.Close()
}

// insertStrataAppender writes through an Appender, one Commit per batch
// of 10,000, with the refs it returns cached per series.
func insertStrataAppender(dir string, ds *bench.Dataset) error {
	db, err := engine.Open(dir, &engine.Options{Sync: engine.SyncNever, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	refs := make([]engine.SeriesRef, ds.Devices)
	field := ds.Fields[0]
	app := db.Appender()
	n := ds.Len()
	for off := 0; off < n; off += 10_000 {
		for i := off; i < min(off+10_000, n); i++ {
			dev, step := i%ds.Devices, i/ds.Devices
			ref, err := app.Append(refs[dev], ds.Measurement, ds.Tags(dev), field, ds.Time(step), engine.Float(ds.Value(0, dev, step)))
			if err != nil {
				app.Rollback()
				db.Close()
				return err
			}
			refs[dev] = ref
		}
		if err := app.Commit(); err != nil {
			db.Close()
			return err
		}
	}
	return db.Close()
}

// insertStrataFreshTags writes with Write, each point with a tag slice of
// its own (strings shared), as a line-protocol or protobuf decoder hands
// them over.
func insertStrataFreshTags(dir string, ds *bench.Dataset) error {
	db, err := engine.Open(dir, &engine.Options{Sync: engine.SyncNever, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	var tags []engine.Tag
	for batch := range ds.Batches(10_000) {
		tags = tags[:0]
		for i := range batch {
			tags = append(tags, batch[i].Tags...)
		}
		// The batch's tags move to one fresh array per batch, as a
		// decoder's are: no address repeats from batch to batch.
		fresh := make([]engine.Tag, len(tags))
		copy(fresh, tags)
		for i := range batch {
			n := len(batch[i].Tags)
			batch[i].Tags, fresh = fresh[:n:n], fresh[n:]
		}
		if err := db.Write(batch); err != nil {
			db.Close()
			return err
		}
	}
	return db.Close()
}

func insertPrometheus(dir string, ds *bench.Dataset) error {
	opts := tsdb.DefaultOptions()
	db, err := tsdb.Open(dir, slog.New(slog.DiscardHandler), nil, opts, nil)
	if err != nil {
		return err
	}
	name := ds.Measurement + "_" + ds.Fields[0]
	refs := make([]storage.SeriesRef, ds.Devices)
	lsets := make([]labels.Labels, ds.Devices)
	for i := range ds.Devices {
		b := labels.NewScratchBuilder(3)
		b.Add(labels.MetricName, name)
		for _, t := range ds.Tags(i) {
			b.Add(t.Key, t.Value)
		}
		b.Sort()
		lsets[i] = b.Labels()
	}
	ctx := context.Background()
	n := ds.Len()
	for off := 0; off < n; off += 10_000 {
		app := db.Appender(ctx)
		for i := off; i < min(off+10_000, n); i++ {
			dev, step := i%ds.Devices, i/ds.Devices
			ref, err := app.Append(refs[dev], lsets[dev], ds.Time(step)/1e6, ds.Value(0, dev, step))
			if err != nil {
				app.Rollback()
				db.Close()
				return err
			}
			refs[dev] = ref
		}
		if err := app.Commit(); err != nil {
			db.Close()
			return err
		}
	}
	return db.Close()
}
