package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// The range scan against VictoriaMetrics' storage: 1,000 series x 600
// samples at 1 s, stored, closed and reopened, then every sample of every
// series read; the first scan after the reopen is cold, the median of the
// following ones warm. VictoriaMetrics' lib/storage runs in its own process
// (internal/vmscan, a module of its own built from VictoriaMetrics' Go
// module at the release below), strata in this one.

const (
	vmscanVersion = "v1.151.0" // keep in step with internal/vmscan/go.mod
	scanSeries    = 1000
	scanPoints    = 600
	scanWarm      = 5
)

var (
	vmscanOnce sync.Once
	vmscanPath string
	vmscanErr  error
)

// vmscanBinary builds internal/vmscan into the user cache directory once.
func vmscanBinary(tb testing.TB) string {
	tb.Helper()
	vmscanOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		vmscanPath = filepath.Join(cache, "strata", "vmscan-"+vmscanVersion)
		if _, err := os.Stat(vmscanPath); err == nil {
			return
		}
		if vmscanErr = os.MkdirAll(filepath.Dir(vmscanPath), 0o755); vmscanErr != nil {
			return
		}
		src, err := filepath.Abs(filepath.Join("internal", "vmscan"))
		if err != nil {
			vmscanErr = err
			return
		}
		tmp := fmt.Sprintf("%s.tmp%d", vmscanPath, os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
		if out, err := cmd.CombinedOutput(); err != nil {
			vmscanErr = fmt.Errorf("build vmscan: %v\n%s", err, out)
			return
		}
		vmscanErr = os.Rename(tmp, vmscanPath)
	})
	if vmscanErr != nil {
		tb.Fatal(vmscanErr)
	}
	return vmscanPath
}

// vmscanResult is what vmscan prints after its scans.
type vmscanResult struct {
	Samples int64   `json:"samples"`
	Series  int     `json:"series"`
	ColdMS  float64 `json:"cold_ms"`
	WarmMS  float64 `json:"warm_ms"`
	Sum     float64 `json:"sum"`
}

// scanDataset returns the points of the range-scan dataset from t0 (Unix
// ns, whole milliseconds), series by series, as vmscan stores them.
func scanDataset(t0 int64) []engine.Point {
	pts := make([]engine.Point, 0, scanSeries*scanPoints)
	for i := range scanSeries {
		tags := []engine.Tag{{Key: "device_id", Value: fmt.Sprintf("dev-%04d", i)}}
		rng := rand.New(rand.NewPCG(904, uint64(i)))
		v := 20.0 + float64(i%7)
		for p := range scanPoints {
			if p > 0 {
				v += rng.Float64()*0.5 - 0.25
			}
			pts = append(pts, engine.Point{Measurement: "sensor", Tags: tags, Time: t0 + int64(p)*1e9,
				Fields: []engine.Field{{Key: "value", Value: engine.Float(math.Round(v*100) / 100)}}})
		}
	}
	// Time-major, as a fleet of devices reports.
	slices.SortStableFunc(pts, func(a, b engine.Point) int { return cmp.Compare(a.Time, b.Time) })
	return pts
}

// BenchmarkRangeScanVsVictoriaMetrics reports the warm and cold range scan
// of strata and of VictoriaMetrics' lib/storage, and their ratio:
//
//	go test -run '^$' -bench RangeScanVsVictoriaMetrics -benchtime 20x ./bench/
func BenchmarkRangeScanVsVictoriaMetrics(b *testing.B) {
	vm := vmscanBinary(b)
	dir := b.TempDir()
	// A recent hour: lib/storage refuses samples outside its retention.
	t0ms := (time.Now().Unix() - 3600) * 1000
	args := []string{"-dir", filepath.Join(dir, "vm"), "-t0", strconv.FormatInt(t0ms, 10),
		"-series", strconv.Itoa(scanSeries), "-points", strconv.Itoa(scanPoints), "-loggerLevel", "ERROR"}
	if out, err := exec.Command(vm, append(args, "-write")...).CombinedOutput(); err != nil {
		b.Fatalf("vmscan -write: %v\n%s", err, out)
	}
	out, err := exec.Command(vm, append(args, "-scans", strconv.Itoa(scanWarm))...).Output()
	if err != nil {
		b.Fatalf("vmscan: %v", err)
	}
	var vr vmscanResult
	if err := json.Unmarshal(out, &vr); err != nil {
		b.Fatalf("vmscan output %q: %v", out, err)
	}

	sdir := filepath.Join(dir, "strata")
	opts := &engine.Options{Sync: engine.SyncNever}
	db, err := engine.Open(sdir, opts)
	if err != nil {
		b.Fatal(err)
	}
	pts := scanDataset(t0ms * 1e6)
	for len(pts) > 0 {
		n := min(len(pts), 10_000)
		if err := db.Write(pts[:n]); err != nil {
			b.Fatal(err)
		}
		pts = pts[n:]
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	sel := engine.Selector{Measurement: "sensor", Start: t0ms * 1e6, End: t0ms*1e6 + scanPoints*1e9}
	// Scan reads the samples column by column, as VictoriaMetrics' Search
	// and Block do; Query builds a Sample per sample.
	scan := func(db *engine.DB) (samples int64, series int, sum float64) {
		last := ""
		for c, err := range db.Scan(context.Background(), sel) {
			if err != nil {
				b.Fatal(err)
			}
			if c.Tags[0].Value != last {
				series, last = series+1, c.Tags[0].Value
			}
			samples += int64(c.Len())
			for _, v := range c.Floats {
				sum += v
			}
		}
		return samples, series, sum
	}
	query := func(db *engine.DB) (samples int64, series int, sum float64) {
		res, err := db.Query(context.Background(), engine.Query{Selector: sel})
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range res {
			samples += int64(len(s.Samples))
			for _, x := range s.Samples {
				sum += x.Value.Float()
			}
		}
		return samples, len(res), sum
	}
	var cold [2]time.Duration
	var warm [2][]time.Duration
	for i, read := range []func(*engine.DB) (int64, int, float64){scan, query} {
		if db, err = engine.Open(sdir, opts); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		samples, series, sum := read(db)
		cold[i] = time.Since(start)
		if samples != vr.Samples || series != vr.Series || math.Abs(sum-vr.Sum) > 1e-9*math.Abs(sum) {
			b.Fatalf("strata scanned %d samples of %d series (sum %v), VictoriaMetrics %d of %d (sum %v)",
				samples, series, sum, vr.Samples, vr.Series, vr.Sum)
		}
		for range 3 { // settle
			read(db)
		}
		if i == 0 {
			for b.Loop() {
				start := time.Now()
				read(db)
				warm[i] = append(warm[i], time.Since(start))
			}
		} else {
			for range max(b.N, 5) {
				start := time.Now()
				read(db)
				warm[i] = append(warm[i], time.Since(start))
			}
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return ms(ds[len(ds)/2])
	}
	sw, qw := median(warm[0]), median(warm[1])
	b.ReportMetric(sw, "strata-warm-ms")
	b.ReportMetric(ms(cold[0]), "strata-cold-ms")
	b.ReportMetric(qw, "strata-query-warm-ms")
	b.ReportMetric(ms(cold[1]), "strata-query-cold-ms")
	b.ReportMetric(vr.WarmMS, "vm-warm-ms")
	b.ReportMetric(vr.ColdMS, "vm-cold-ms")
	b.ReportMetric(sw/vr.WarmMS, "warm-strata/vm")
	b.ReportMetric(qw/vr.WarmMS, "warm-query/vm")
}
