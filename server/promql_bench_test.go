package server

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// BenchmarkPromQLRange answers a Grafana-style query_range over the
// baseline's first 10 minutes (1,000 series x 600 samples, flushed to a
// segment): the raw range of every series read through Scan, then
// PromQL's avg_over_time per series at a 15 s step.
//
//	cd server && go test -run '^$' -bench PromQLRange -benchtime 50x .
func BenchmarkPromQLRange(b *testing.B) {
	ts := newTestServer(b, nil)
	for _, body := range baselineBodies(1000, 600, 10_000) {
		if code, _, msg := ts.do(http.MethodPost, "/api/v2/write?precision=ns", body); code != http.StatusNoContent {
			b.Fatalf("write: %d %s", code, msg)
		}
	}
	if err := ts.db.Flush(); err != nil {
		b.Fatal(err)
	}
	v := url.Values{"query": {"avg_over_time(sensor_temperature[1m])"},
		"start": {"1700000060"}, "end": {"1700000599"}, "step": {"15"}}
	path := "/api/v1/query_range?" + v.Encode()
	b.ReportAllocs()
	for b.Loop() {
		code, _, body := ts.do(http.MethodGet, path, nil)
		if code != http.StatusOK || strings.Count(body, `"metric"`) != 1000 {
			b.Fatalf("query_range: %d %.300s", code, body)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/query")
}
