package server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/stratadb/strata/engine"
)

// BenchmarkOTLPWrite posts OTLP protobuf requests of 10,000 gauge samples
// (100 series x 100 points) to the handler and reports samples/s.
func BenchmarkOTLPWrite(b *testing.B) {
	ts := newTestServerDB(b, &engine.Options{Sync: engine.SyncAlways}, nil)
	const series, points = 100, 100
	base := time.Now().Add(-time.Hour)
	body := func(round int) []byte {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", "bench")
		sm := rm.ScopeMetrics().AppendEmpty()
		for s := range series {
			m := sm.Metrics().AppendEmpty()
			m.SetName(fmt.Sprintf("machine.temp.%d", s%10))
			g := m.SetEmptyGauge()
			for p := range points {
				dp := g.DataPoints().AppendEmpty()
				dp.Attributes().PutStr("cell", fmt.Sprint(s))
				dp.SetTimestamp(pcommon.NewTimestampFromTime(base.Add(time.Duration(round*points+p) * time.Millisecond)))
				dp.SetDoubleValue(float64(p))
			}
		}
		out, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	bodies := make([][]byte, 8)
	for i := range bodies {
		bodies[i] = body(i)
	}
	b.ReportAllocs()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ResetTimer()
	start := time.Now()
	i := 0
	for b.Loop() {
		req := httptest.NewRequest("POST", "/api/v1/otlp/v1/metrics", bytes.NewReader(bodies[i%len(bodies)]))
		req.Header.Set("Content-Type", "application/x-protobuf")
		rec := httptest.NewRecorder()
		ts.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body.String())
		}
		i++
	}
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(i*series*points)/time.Since(start).Seconds(), "samples/s")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(i*series*points), "B/sample")
}
