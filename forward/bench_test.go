package forward

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/testutil"
	"google.golang.org/protobuf/encoding/protowire"
)

// baseline returns the 1M-point baseline dataset (devices x steps points
// of sensor,device_id,site temperature) in batches of 10,000.
func baseline(devices, steps int) [][]engine.Point {
	tags := make([][]engine.Tag, devices)
	for i := range devices {
		tags[i] = testutil.IoTTags(i)
	}
	w := testutil.NewIoTWalk(devices)
	pts := make([]engine.Point, 0, devices*steps)
	for range steps {
		t, temps := w.Next()
		for i, v := range temps {
			pts = append(pts, engine.Point{Measurement: testutil.IoTMeasurement, Tags: tags[i],
				Fields: []engine.Field{{Key: testutil.IoTField, Value: engine.Float(v)}}, Time: t})
		}
	}
	var batches [][]engine.Point
	for len(pts) > 0 {
		n := min(10_000, len(pts))
		batches = append(batches, pts[:n:n])
		pts = pts[n:]
	}
	return batches
}

// discardServer accepts every request, reading its body.
func discardServer(tb testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// sink is a loopback remote write receiver for benchmarks: while timed it
// only keeps the bodies it gets (as a remote on another machine, it costs
// this process little), and check decodes them afterwards.
type sink struct {
	srv   *httptest.Server
	mu    sync.Mutex
	arena []byte
	ends  []int // end of each body in arena
}

func newSink(tb testing.TB) *sink {
	s := &sink{arena: make([]byte, 0, 64<<20)}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		start := len(s.arena)
		if n := r.ContentLength; n > 0 {
			s.arena = slices.Grow(s.arena, int(n))
		}
		for {
			if len(s.arena) == cap(s.arena) {
				s.arena = slices.Grow(s.arena, 64<<10)
			}
			n, err := r.Body.Read(s.arena[len(s.arena):cap(s.arena)])
			s.arena = s.arena[:len(s.arena)+n]
			if err == io.EOF {
				break
			}
			if err != nil {
				s.arena = s.arena[:start]
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		s.ends = append(s.ends, len(s.arena))
		w.WriteHeader(http.StatusNoContent)
	}))
	tb.Cleanup(s.srv.Close)
	return s
}

func (s *sink) reset() {
	s.mu.Lock()
	s.arena, s.ends = s.arena[:0], s.ends[:0]
	s.mu.Unlock()
}

// check decodes every remote write request received since reset and
// verifies that it holds devices series of steps samples each, every
// sample once, in time order per series.
func (s *sink) check(devices, steps int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	type seen struct {
		last int64
		n    int
	}
	series := map[string]*seen{}
	var raw []byte
	start := 0
	for _, end := range s.ends {
		var err error
		if raw, err = s2.Decode(raw[:cap(raw)], s.arena[start:end]); err != nil {
			return fmt.Errorf("snappy: %w", err)
		}
		start = end
		for b := raw; len(b) > 0; {
			_, _, n := protowire.ConsumeTag(b)
			ts, m := protowire.ConsumeBytes(b[max(n, 0):])
			if n < 0 || m < 0 {
				return fmt.Errorf("bad WriteRequest")
			}
			b = b[n+m:]
			labels, nl := ts, 0 // the Label fields: the first nl bytes
			var x *seen         // the series, once its labels are read (they come first)
			for len(ts) > 0 {
				num, _, n := protowire.ConsumeTag(ts)
				v, m := protowire.ConsumeBytes(ts[max(n, 0):])
				if n < 0 || m < 0 {
					return fmt.Errorf("bad TimeSeries")
				}
				field := ts[:n+m]
				ts = ts[n+m:]
				if num == 1 {
					if x != nil {
						return fmt.Errorf("label after samples")
					}
					nl += len(field)
					continue
				}
				// Sample: value (tag, 8 bytes), timestamp (tag, varint).
				ms, k := protowire.ConsumeVarint(v[min(10, len(v)):])
				if len(v) < 10 || k < 0 {
					return fmt.Errorf("bad Sample")
				}
				if x == nil {
					if x = series[string(labels[:nl])]; x == nil {
						x = &seen{last: math.MinInt64}
						series[string(labels[:nl])] = x
					}
				}
				if int64(ms) <= x.last {
					return fmt.Errorf("series %q: sample at %d after %d", labels[:nl], ms, x.last)
				}
				x.last = int64(ms)
				x.n++
			}
		}
	}
	if len(series) != devices {
		return fmt.Errorf("%d series, want %d", len(series), devices)
	}
	for k, x := range series {
		if x.n != steps {
			return fmt.Errorf("series %q: %d samples, want %d", k, x.n, steps)
		}
	}
	return nil
}

// BenchmarkIngest measures what forwarding costs local ingest: the 1M-point
// baseline written with SyncNever, timed from the first Write to the return
// of the last, without a forwarder ("off"), with the queue only (forwarder
// not started: the engine-side cost), and with delivery running to a
// loopback remote write receiver ("forwarding"). After the timed part the
// forwarding run waits until every point is acknowledged and checks that
// the receiver got each exactly once, in order per series. Each iteration
// runs the three modes one after the other, in an order rotated from one
// iteration to the next and each after a sync(2) and a GC, so that the load
// of a shared machine, the writeback and the garbage of earlier runs weigh
// on them alike. It reports the median over iterations of each mode's rate
// and CPU time per point, of the slowdown of the other two against off in
// the same iteration, of the time delivery took to finish after ingest
// ("drain-ms"), and of the CPU delivery cost in all
// ("deliver-cpu-ns/point": forwarding's CPU through the last
// acknowledgement less off's). "writer-cpu-ns/point" is the CPU time of
// the writing thread alone (Linux): the work on the write path, which the
// competition of other threads for the cores does not inflate the way it
// does wall time. The linger=1s case is the default policy (a burst
// shorter than Linger is delivered after it);
// linger=20ms forces delivery to keep pace with ingest; writes-of-100
// writes the same points 100 at a time, where each write's own costs (the
// queue's system call among them) weigh more.
func BenchmarkIngest(b *testing.B) {
	const devices, steps = 1000, 1000
	const n = devices * steps
	batches := baseline(devices, steps)
	rcv := newSink(b)
	for _, c := range []struct {
		linger time.Duration
		write  int // points a Write
	}{{time.Second, 10_000}, {20 * time.Millisecond, 10_000}, {time.Second, 100}} {
		name := fmt.Sprintf("linger=%v", c.linger)
		if c.write != 10_000 {
			name += fmt.Sprintf("/writes-of-%d", c.write)
		}
		b.Run(name, func(b *testing.B) {
			benchIngest(b, batches, n, devices, steps, rcv, c.linger, c.write)
		})
	}
}

func benchIngest(b *testing.B, batches [][]engine.Point, n, devices, steps int, rcv *sink, linger time.Duration, write int) {
	modes := []string{"off", "queue", "forwarding"}
	type result struct{ wall, cpu, writer, drain, drainCPU time.Duration }
	run := func(mode string) result {
		var r result
		dir := b.TempDir()
		syncAll() // start each run with no earlier run's writeback pending
		db, err := engine.Open(dir, &engine.Options{Sync: engine.SyncNever, Logger: quiet()})
		if err != nil {
			b.Fatal(err)
		}
		rcv.reset()
		var f *Forwarder
		if mode != "off" {
			if f, err = New(db, Options{URL: rcv.srv.URL, Protocol: Prometheus, Logger: quiet(), Linger: linger}); err != nil {
				b.Fatal(err)
			}
			if mode == "forwarding" {
				if err := f.Start(); err != nil {
					b.Fatal(err)
				}
			}
		}
		runtime.GC() // each run starts from the same heap, whatever ran before it
		runtime.LockOSThread()
		start, c0, t0 := time.Now(), testutil.CPUTime(), threadCPU()
		for _, batch := range batches {
			for j := 0; j < len(batch); j += write {
				if err := db.Write(batch[j:min(j+write, len(batch))]); err != nil {
					b.Fatal(err)
				}
			}
		}
		r.wall, r.cpu, r.writer = time.Since(start), testutil.CPUTime()-c0, threadCPU()-t0
		runtime.UnlockOSThread()
		if mode == "forwarding" {
			for deadline := time.Now().Add(5 * time.Minute); f.Stats().SamplesSent < int64(n); {
				if time.Now().After(deadline) {
					b.Fatalf("delivery stalled: %+v", f.Stats())
				}
				time.Sleep(time.Millisecond) // polling interval
			}
			r.drain, r.drainCPU = time.Since(start)-r.wall, testutil.CPUTime()-c0-r.cpu
		}
		if f != nil {
			f.Close()
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		if mode == "forwarding" {
			if err := rcv.check(devices, steps); err != nil {
				b.Fatal(err)
			}
		}
		return r
	}
	var res [3][]result
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		for j := range modes { // rotate the order from one iteration to the next
			i := (j + k) % len(modes)
			// Labelled, so that a CPU profile splits by mode (pprof -tagfocus).
			pprof.Do(context.Background(), pprof.Labels("mode", modes[i]), func(context.Context) {
				res[i] = append(res[i], run(modes[i]))
			})
		}
		k++
	}
	perPoint := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) }
	for i, m := range modes {
		b.ReportMetric(median(res[i], func(r result) float64 { return float64(n) / r.wall.Seconds() }), m+"-points/s")
		b.ReportMetric(median(res[i], func(r result) float64 { return perPoint(r.cpu) }), m+"-cpu-ns/point")
		b.ReportMetric(median(res[i], func(r result) float64 { return perPoint(r.writer) }), m+"-writer-cpu-ns/point")
	}
	for i, m := range modes[1:] {
		slow := make([]float64, len(res[0]))
		for j := range slow {
			slow[j] = 100 * (res[i+1][j].wall.Seconds()/res[0][j].wall.Seconds() - 1)
		}
		b.ReportMetric(median(slow, func(x float64) float64 { return x }), m+"-slowdown-%")
		b.Logf("%s slowdown over %d iterations: %.1f%% to %.1f%%", m, len(slow), slices.Min(slow), slices.Max(slow))
	}
	fw := res[2]
	b.ReportMetric(median(fw, func(r result) float64 { return float64(r.drain.Milliseconds()) }), "drain-ms")
	deliver := make([]float64, len(fw))
	for j := range fw {
		deliver[j] = perPoint(fw[j].cpu + fw[j].drainCPU - res[0][j].cpu)
	}
	b.ReportMetric(median(deliver, func(x float64) float64 { return x }), "deliver-cpu-ns/point")
}

// median returns the median of f over xs.
func median[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// BenchmarkThroughput measures delivery alone: 1M queued points (1,000
// series, written 10,000 or 100 at a time: a queue frame each) sent from the
// queue to a loopback remote, timed from Start until
// the last is acknowledged, with this process's CPU time per point (the
// remote's own work is in it for the discarding server, not for
// VictoriaMetrics, which runs in its own process).
func BenchmarkThroughput(b *testing.B) {
	batches := baseline(1000, 1000)
	const n = 1_000_000
	for _, c := range []struct {
		name  string
		proto Protocol
		vm    bool
		write int // points a Write
	}{{"prometheus/discard", Prometheus, false, 10_000}, {"influx/discard", Influx, false, 10_000},
		{"prometheus/discard/writes-of-100", Prometheus, false, 100},
		{"prometheus/victoria-metrics", Prometheus, true, 10_000}, {"influx/victoria-metrics", Influx, true, 10_000}} {
		b.Run(c.name, func(b *testing.B) {
			var url string
			if c.vm {
				v := startVM(b)
				url = v.url("/api/v1/write")
				if c.proto == Influx {
					url = v.url("/write")
				}
			} else {
				url = discardServer(b).URL
			}
			var cpu, wall time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				db, err := engine.Open(b.TempDir(), &engine.Options{Sync: engine.SyncNever, Logger: quiet()})
				if err != nil {
					b.Fatal(err)
				}
				f, err := New(db, Options{URL: url, Protocol: c.proto, Logger: quiet(), Linger: time.Millisecond})
				if err != nil {
					b.Fatal(err)
				}
				for _, batch := range batches {
					// Shift each iteration's timestamps so VictoriaMetrics
					// gets new samples, not duplicates.
					batch = shifted(batch, int64(i)*int64(time.Hour))
					for j := 0; j < len(batch); j += c.write {
						if err := db.Write(batch[j:min(j+c.write, len(batch))]); err != nil {
							b.Fatal(err)
						}
					}
				}
				c0, w0 := testutil.CPUTime(), time.Now()
				b.StartTimer()
				f.Start()
				for f.Stats().SamplesSent < n {
					time.Sleep(time.Millisecond) // polling interval
				}
				b.StopTimer()
				cpu += testutil.CPUTime() - c0
				wall += time.Since(w0)
				f.Close()
				db.Close()
			}
			b.ReportMetric(float64(n*b.N)/wall.Seconds(), "points/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(n*b.N), "cpu-ns/point")
		})
	}
}

func shifted(batch []engine.Point, d int64) []engine.Point {
	if d == 0 {
		return batch
	}
	out := make([]engine.Point, len(batch))
	for i, p := range batch {
		p.Time += d
		out[i] = p
	}
	return out
}

// BenchmarkEncode measures a batch's encoding alone (10,000 samples of
// 1,000 series, as the sender builds them), compression included.
func BenchmarkEncode(b *testing.B) {
	// The baseline's first 10 steps: 1,000 series, random-walk values.
	var samples []engine.FeedSample
	for _, p := range baseline(1000, 10)[0] {
		d, _ := strconv.Atoi(strings.TrimPrefix(p.Tags[0].Value, "dev-"))
		samples = append(samples, engine.FeedSample{ID: uint64(d), Time: p.Time, Value: p.Fields[0].Value})
	}
	metas := make([]seriesMeta, 1000)
	for d := range metas {
		info := engine.SeriesInfo{Measurement: "sensor", Field: "temperature", Kind: engine.KindFloat,
			Tags: []engine.Tag{{Key: "device_id", Value: fmt.Sprintf("dev-%04d", d)}, {Key: "site", Value: fmt.Sprintf("site-%02d", d%10)}}}
		metas[d] = seriesMeta{kind: engine.KindFloat, labels: promLabels(info)}
		metas[d].prefix, metas[d].field = influxParts(fmt.Sprintf("sensor,device_id=dev-%04d,site=site-%02d temperature", d, d%10))
	}
	meta := func(id uint64) *seriesMeta { return &metas[id] }
	b.Run("prometheus", func(b *testing.B) {
		var e promEncoder
		var raw, out []byte
		b.ReportAllocs()
		for b.Loop() {
			e.add(samples)
			raw, _ = e.encode(raw[:0], meta)
			out = s2.EncodeSnappy(out[:cap(out)], raw)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(samples)), "ns/point")
		b.ReportMetric(float64(len(out))/float64(len(samples)), "B/point")
	})
	b.Run("influx", func(b *testing.B) {
		var out []byte
		b.ReportAllocs()
		for b.Loop() {
			out = encodeInflux(out[:0], samples, meta)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(samples)), "ns/point")
		b.ReportMetric(float64(len(out))/float64(len(samples)), "B/point")
	})
}
