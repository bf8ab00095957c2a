package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/testutil"
)

// baselineBodies renders the 1M-point IoT baseline (docs/benchmarks.md: 1,000 devices
// x 1,000 timestamps, measurement sensor, tags device_id and site, field
// temperature as a seeded random walk rounded to 0.01, 1 s apart from
// 1,700,000,000 s) as line-protocol request bodies of linesPer lines, in
// time order.
func baselineBodies(devices, steps, linesPer int) [][]byte {
	w := testutil.NewIoTWalk(devices)
	var bodies [][]byte
	var b []byte
	n := 0
	for range steps {
		ts, vals := w.Next()
		for i, v := range vals {
			b = testutil.AppendIoTLine(b, i, v, ts)
			if n++; n == linesPer {
				bodies = append(bodies, bytes.Clone(b))
				b = b[:0]
				n = 0
			}
		}
	}
	if len(b) > 0 {
		bodies = append(bodies, bytes.Clone(b))
	}
	return bodies
}

// BenchmarkHTTPWriteBaseline writes the 1M-point baseline through
// /api/v2/write over loopback TCP: 10,000 lines per request, 2 concurrent
// clients, a fresh database per iteration (SyncNever, the bench's "fast"
// column; sub-benchmark durable uses SyncAlways). The time covers the
// requests and the Close of the database; the clients run in the same
// process, so cpu-ns/point counts them too.
func BenchmarkHTTPWriteBaseline(b *testing.B) {
	bodies := baselineBodies(1000, 1000, 10_000)
	var bodyBytes int64
	for _, body := range bodies {
		bodyBytes += int64(len(body))
	}
	for _, c := range []struct {
		name string
		sync engine.SyncMode
	}{{"fast", engine.SyncNever}, {"durable", engine.SyncAlways}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(bodyBytes)
			var total, cpu time.Duration
			for range b.N {
				b.StopTimer()
				db, err := engine.Open(b.TempDir(), &engine.Options{Sync: c.sync})
				if err != nil {
					b.Fatal(err)
				}
				h, err := New(db, nil)
				if err != nil {
					b.Fatal(err)
				}
				srv := httptest.NewServer(h)
				client := srv.Client()
				client.Transport.(*http.Transport).MaxIdleConnsPerHost = 2
				b.StartTimer()
				start, cpu0 := time.Now(), processCPU()
				var wg sync.WaitGroup
				errc := make(chan error, 2)
				for w := range 2 {
					wg.Go(func() {
						for i := w; i < len(bodies); i += 2 {
							resp, err := client.Post(srv.URL+"/api/v2/write?precision=ns", "text/plain", bytes.NewReader(bodies[i]))
							if err != nil {
								errc <- err
								return
							}
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							if resp.StatusCode != http.StatusNoContent {
								errc <- fmt.Errorf("status %d", resp.StatusCode)
								return
							}
						}
					})
				}
				wg.Wait()
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				cpu += processCPU() - cpu0
				b.StopTimer()
				srv.Close()
				close(errc)
				if err := <-errc; err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.N)*1e6/total.Seconds(), "points/s")
			// CPU time of the whole process (server, clients, engine) per
			// point: on a loaded machine, points/s of an idle one with two
			// cores is at most 2e9 / cpu-ns/point.
			b.ReportMetric(float64(cpu.Nanoseconds())/(float64(b.N)*1e6), "cpu-ns/point")
		})
	}
}
