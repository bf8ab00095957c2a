package forward

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/stratadb/strata/engine"
)

// baseline returns the DESIGN.md 1M-point dataset (devices x steps points
// of sensor,device_id,site temperature) in batches of 10,000.
func baseline(devices, steps int) [][]engine.Point {
	tags := make([][]engine.Tag, devices)
	rngs := make([]*rand.Rand, devices)
	temps := make([]float64, devices)
	for i := range devices {
		tags[i] = []engine.Tag{{Key: "device_id", Value: fmt.Sprintf("dev-%04d", i)}, {Key: "site", Value: fmt.Sprintf("site-%02d", i%10)}}
		rngs[i] = rand.New(rand.NewPCG(904, uint64(i)))
		temps[i] = 20 + float64(i%7)
	}
	pts := make([]engine.Point, 0, devices*steps)
	for s := range steps {
		for i := range devices {
			if s > 0 {
				temps[i] = math.Round((temps[i]+rngs[i].Float64()*0.5-0.25)*100) / 100
			}
			pts = append(pts, engine.Point{Measurement: "sensor", Tags: tags[i],
				Fields: []engine.Field{{Key: "temperature", Value: engine.Float(temps[i])}}, Time: t0 + int64(s)*int64(time.Second)})
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

// BenchmarkIngest measures what forwarding costs local ingest: the 1M-point
// baseline written with SyncNever (timed from Open to Close) without a
// forwarder ("off"), with the queue only (forwarder not started: the
// engine-side cost), and with delivery running to a loopback server that
// discards what it gets. Each iteration runs the three modes one after the
// other, in an order rotated from one iteration to the next and each after
// a sync(2), so that the load of a shared machine and the writeback of
// earlier runs weigh on them alike; it reports each mode's rate and CPU
// time per point, and the slowdown of the other two against off.
func BenchmarkIngest(b *testing.B) {
	batches := baseline(1000, 1000)
	srv := discardServer(b)
	modes := []string{"off", "queue", "forwarding"}
	var took, cpu [3]time.Duration
	run := func(mode string) (time.Duration, time.Duration) {
		dir := b.TempDir()
		syscall.Sync() // start each run with no earlier run's writeback pending
		start, c0 := time.Now(), cpuTime()
		db, err := engine.Open(dir, &engine.Options{Sync: engine.SyncNever, Logger: quiet()})
		if err != nil {
			b.Fatal(err)
		}
		var f *Forwarder
		if mode != "off" {
			if f, err = New(db, Options{URL: srv.URL, Protocol: Prometheus, Logger: quiet()}); err != nil {
				b.Fatal(err)
			}
			if mode == "forwarding" {
				f.Start()
			}
		}
		for _, batch := range batches {
			if err := db.Write(batch); err != nil {
				b.Fatal(err)
			}
		}
		if f != nil {
			f.Close()
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start), cpuTime() - c0
	}
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		for j := range modes { // rotate the order from one iteration to the next
			i := (j + k) % len(modes)
			w, c := run(modes[i])
			took[i] += w
			cpu[i] += c
		}
		k++
	}
	for i, m := range modes {
		b.ReportMetric(1e6*float64(b.N)/took[i].Seconds(), m+"-points/s")
		b.ReportMetric(float64(cpu[i].Nanoseconds())/(1e6*float64(b.N)), m+"-cpu-ns/point")
	}
	b.ReportMetric(100*(took[1].Seconds()/took[0].Seconds()-1), "queue-slowdown-%")
	b.ReportMetric(100*(took[2].Seconds()/took[0].Seconds()-1), "forwarding-slowdown-%")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkThroughput measures delivery alone: 1M queued points (1,000
// series) sent from the queue to a loopback remote, timed from Start until
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
	}{{"prometheus/discard", Prometheus, false}, {"influx/discard", Influx, false},
		{"prometheus/victoria-metrics", Prometheus, true}, {"influx/victoria-metrics", Influx, true}} {
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
				for j, batch := range batches {
					// Shift each iteration's timestamps so VictoriaMetrics
					// gets new samples, not duplicates.
					if err := db.Write(shifted(batch, int64(i)*int64(time.Hour))); err != nil {
						b.Fatal(err, j)
					}
				}
				c0, w0 := cpuTime(), time.Now()
				b.StartTimer()
				f.Start()
				for f.Stats().SamplesSent < n {
					time.Sleep(time.Millisecond) // polling interval
				}
				b.StopTimer()
				cpu += cpuTime() - c0
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
	var samples []engine.FeedSample
	for s := range 10 {
		for d := range 1000 {
			samples = append(samples, engine.FeedSample{ID: uint64(d), Time: t0 + int64(s)*int64(time.Second), Value: engine.Float(20 + float64(d%7) + float64(s)/100)})
		}
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
			raw, _ = e.encode(raw[:0], samples, meta)
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
