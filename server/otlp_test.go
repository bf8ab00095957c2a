package server

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
)

// promQuery runs an instant PromQL query at time at and returns each
// series as "labels value", sorted.
func (ts *testServer) promQuery(q string, at time.Time) []string {
	ts.t.Helper()
	v := url.Values{"query": {q}, "time": {fmt.Sprintf("%.3f", float64(at.UnixMilli())/1000)}}
	code, _, body := ts.do("GET", "/api/v1/query?"+v.Encode(), nil)
	if code != 200 {
		ts.t.Fatalf("query %s: %d %s", q, code, body)
	}
	res := decodeJSON(ts.t, body)["data"].(map[string]any)["result"].([]any)
	var out []string
	for _, r := range res {
		m := r.(map[string]any)
		var ls []string
		for k, v := range m["metric"].(map[string]any) {
			ls = append(ls, k+"="+v.(string))
		}
		sort.Strings(ls)
		out = append(out, strings.Join(ls, ",")+" "+m["value"].([]any)[1].(string))
	}
	sort.Strings(out)
	return out
}

// TestOTLPExporter exports gauges, sums and histograms with the
// OpenTelemetry Go SDK's OTLP/HTTP exporter (protobuf, gzip) and reads them
// back through the query API under Prometheus' OTLP names.
func TestOTLPExporter(t *testing.T) {
	ts := newTestServer(t, nil)
	ctx := context.Background()
	exp, err := otlpmetrichttp.New(ctx,
		otlpmetrichttp.WithEndpointURL(ts.srv.URL+"/api/v1/otlp/v1/metrics"),
		otlpmetrichttp.WithCompression(otlpmetrichttp.GzipCompression))
	if err != nil {
		t.Fatal(err)
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", "checkout"),
		attribute.String("service.instance.id", "i-1"),
		attribute.String("deployment.environment", "prod"))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Hour))))
	defer mp.Shutdown(ctx)
	m := mp.Meter("strata-test")

	gauge, _ := m.Float64Gauge("room.temperature", metric.WithUnit("Cel"))
	gauge.Record(ctx, 21.5, metric.WithAttributes(attribute.String("room", "a")))
	counter, _ := m.Int64Counter("http.requests", metric.WithUnit("{request}"))
	counter.Add(ctx, 2, metric.WithAttributes(attribute.String("method", "GET")))
	counter.Add(ctx, 1, metric.WithAttributes(attribute.String("method", "GET")))
	counter.Add(ctx, 5, metric.WithAttributes(attribute.String("method", "POST")))
	updown, _ := m.Int64UpDownCounter("queue.size")
	updown.Add(ctx, 7)
	updown.Add(ctx, -3)
	hist, _ := m.Float64Histogram("request.duration", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(0.25, 1))
	hist.Record(ctx, 0.1)
	hist.Record(ctx, 0.5)
	hist.Record(ctx, 3)
	if err := mp.ForceFlush(ctx); err != nil {
		t.Fatalf("export: %v", err)
	}

	now := time.Now()
	id := "instance=i-1,job=checkout"
	check := func(q string, want ...string) {
		t.Helper()
		got := ts.promQuery(q, now)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", q, got, want)
		}
	}
	check("room_temperature_celsius", "__name__=room_temperature_celsius,"+id+",room=a 21.5")
	check("http_requests_total", "__name__=http_requests_total,"+id+",method=GET 3", "__name__=http_requests_total,"+id+",method=POST 5")
	check("queue_size", "__name__=queue_size,"+id+" 4")
	check("request_duration_seconds_bucket",
		"__name__=request_duration_seconds_bucket,"+id+",le=+Inf 3",
		"__name__=request_duration_seconds_bucket,"+id+",le=0.25 1",
		"__name__=request_duration_seconds_bucket,"+id+",le=1 2")
	check("request_duration_seconds_sum", "__name__=request_duration_seconds_sum,"+id+" 3.6")
	check("request_duration_seconds_count", "__name__=request_duration_seconds_count,"+id+" 3")
	check("target_info", "__name__=target_info,deployment_environment=prod,"+id+" 1")
}

// TestOTLPJSON posts an OTLP JSON request and checks the answer's encoding.
func TestOTLPJSON(t *testing.T) {
	ts := newTestServer(t, nil)
	ms := time.Now().Add(-time.Minute).UnixMilli()
	body := fmt.Sprintf(`{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"edge"}},{"key":"service.namespace","value":{"stringValue":"plant"}}]},
"scopeMetrics":[{"metrics":[{"name":"line.speed","unit":"m/s","gauge":{"dataPoints":[{"timeUnixNano":"%d","asDouble":1.25,"attributes":[{"key":"line","value":{"stringValue":"L1"}}]}]}},
{"name":"parts","sum":{"isMonotonic":true,"aggregationTemporality":2,"dataPoints":[{"timeUnixNano":"%d","asInt":"42"}]}},
{"name":"bad","gauge":{"dataPoints":[{"timeUnixNano":"%d","asDouble":"NaN"}]}},
{"name":"gone","gauge":{"dataPoints":[{"timeUnixNano":"%d","asDouble":1,"flags":1}]}},
{"name":"lat","exponentialHistogram":{"aggregationTemporality":2,"dataPoints":[{"timeUnixNano":"%d","count":"3","sum":1.5,"scale":0,"zeroCount":"1","positive":{"offset":0,"bucketCounts":["1","1"]}}]}}]}]}]}`,
		ms*1e6, ms*1e6, ms*1e6, ms*1e6, ms*1e6)
	code, hdr, resp := ts.do("POST", "/api/v1/otlp/v1/metrics", []byte(body), "Content-Type", "application/json")
	if code != 200 || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s %s", code, hdr.Get("Content-Type"), resp)
	}
	at := time.UnixMilli(ms)
	if got := ts.promQuery("line_speed_meters_per_second", at); len(got) != 1 || got[0] != "__name__=line_speed_meters_per_second,job=plant/edge,line=L1 1.25" {
		t.Errorf("line speed = %q", got)
	}
	if got := ts.promQuery("parts_total", at); len(got) != 1 || got[0] != "__name__=parts_total,job=plant/edge 42" {
		t.Errorf("parts = %q", got)
	}
	if got := ts.promQuery("bad", at); len(got) != 0 {
		t.Errorf("NaN stored: %q", got)
	}
	// What is not stored is counted: the NaN, the point without a
	// recorded value, the exponential histogram.
	_, _, metrics := ts.do("GET", "/metrics", nil)
	for _, reason := range []string{"non_finite", "stale", "histogram"} {
		if want := `strata_otlp_samples_skipped_total{reason="` + reason + `"} 1`; !strings.Contains(metrics, want) {
			t.Errorf("no %s in\n%s", want, grepLines(metrics, "otlp"))
		}
	}

	// Not OTLP, another media type, over the limit.
	if code, _, _ := ts.do("POST", "/api/v1/otlp/v1/metrics", []byte("{not json"), "Content-Type", "application/json"); code != 400 {
		t.Errorf("bad JSON: %d", code)
	}
	if code, _, _ := ts.do("POST", "/api/v1/otlp/v1/metrics", []byte("\xff\xff\xff"), "Content-Type", "application/x-protobuf"); code != 400 {
		t.Errorf("bad protobuf: %d", code)
	}
	if code, _, _ := ts.do("POST", "/api/v1/otlp/v1/metrics", []byte("x"), "Content-Type", "text/plain"); code != 415 {
		t.Errorf("text/plain: %d", code)
	}
	small := newTestServer(t, &Options{MaxBodyBytes: 100})
	if code, _, _ := small.do("POST", "/api/v1/otlp/v1/metrics", gzipBytes(t, []byte(body)), "Content-Type", "application/json", "Content-Encoding", "gzip"); code != 413 {
		t.Errorf("over the limit: %d", code)
	}
	if n := small.count("line_speed_meters_per_second"); n != 0 {
		t.Errorf("%d samples stored from a refused request", n)
	}
}

func FuzzOTLPWrite(f *testing.F) {
	f.Add([]byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"a","gauge":{"dataPoints":[{"timeUnixNano":"1","asDouble":1}]}}]}]}]}`), true)
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00}, false)
	f.Fuzz(func(t *testing.T, body []byte, isJSON bool) {
		ts := newTestServer(t, nil)
		ct := "application/x-protobuf"
		if isJSON {
			ct = "application/json"
		}
		code, _, _ := ts.do("POST", "/api/v1/otlp/v1/metrics", body, "Content-Type", ct)
		if code != 200 && code != 400 {
			t.Fatalf("status %d", code)
		}
	})
}
