package server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/stratadb/strata/engine"
)

// BenchmarkRemoteWrite posts remote-write requests shaped as Prometheus
// sends them (2,000 series of one sample each, six labels, labels sorted)
// to the handler directly, over a SyncNever database: the decode and
// store path without the network.
func BenchmarkRemoteWrite(b *testing.B) {
	const nSeries, nBodies = 2000, 16
	bodies := make([][]byte, nBodies)
	for k := range bodies {
		ts := make([]prompb.TimeSeries, nSeries)
		for i := range ts {
			ts[i] = prompb.TimeSeries{
				Labels: []prompb.Label{
					{Name: "__name__", Value: fmt.Sprintf("node_metric_%d", i%50)},
					{Name: "cpu", Value: fmt.Sprint(i % 8)},
					{Name: "instance", Value: fmt.Sprintf("host-%03d:9100", i/50)},
					{Name: "job", Value: "node"},
					{Name: "mode", Value: []string{"idle", "user", "system"}[i%3]},
					{Name: "zone", Value: "eu-west-1a"},
				},
				Samples: []prompb.Sample{{Timestamp: 1_700_000_000_000 + int64(k)*15_000, Value: float64(i) * 1.5}},
			}
		}
		bodies[k] = remoteBody(b, ts...)
	}
	db, err := engine.Open(b.TempDir(), &engine.Options{Sync: engine.SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	h, err := New(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ResetTimer()
	for i := range b.N {
		req := httptest.NewRequest("POST", "/api/v1/write", bytes.NewReader(bodies[i%nBodies]))
		for j := 0; j+1 < len(remoteHeaders); j += 2 {
			req.Header.Set(remoteHeaders[j], remoteHeaders[j+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusNoContent {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(b.N*nSeries)/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(b.N*nSeries), "B/sample")
}
