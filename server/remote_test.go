package server

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	config_util "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage/remote"

	"github.com/stratadb/strata/engine"
)

var remoteHeaders = []string{
	"Content-Encoding", "snappy",
	"Content-Type", "application/x-protobuf",
	"X-Prometheus-Remote-Write-Version", "0.1.0",
}

// series builds a time series of name with samples at ts (ms) valued t/1000,
// and labels given as name, value pairs.
func series(name string, from, n int64, lbls ...string) prompb.TimeSeries {
	s := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}}}
	for i := 0; i+1 < len(lbls); i += 2 {
		s.Labels = append(s.Labels, prompb.Label{Name: lbls[i], Value: lbls[i+1]})
	}
	for t := from; t < from+n; t++ {
		s.Samples = append(s.Samples, prompb.Sample{Timestamp: t, Value: float64(t) / 1000})
	}
	return s
}

func remoteBody(t testing.TB, ts ...prompb.TimeSeries) []byte {
	t.Helper()
	req := prompb.WriteRequest{Timeseries: ts}
	raw, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return snappy.Encode(nil, raw)
}

func TestRemoteWrite(t *testing.T) {
	ts := newTestServer(t, nil)
	a := series("up", 1000, 3, "job", "node", "instance", "h:9100")
	b := series("http_requests_total", 5, 2, "code", "200", "empty", "")
	special := prompb.TimeSeries{
		Labels: []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "job", Value: "special"}},
		Samples: []prompb.Sample{
			{Timestamp: 1, Value: 1},
			{Timestamp: 2, Value: math.Float64frombits(value.StaleNaN)},
			{Timestamp: 3, Value: math.NaN()},
			{Timestamp: 4, Value: math.Inf(1)},
			{Timestamp: 5, Value: math.Inf(-1)},
			{Timestamp: 6, Value: -6},
		},
		// Native histograms are not stored, and counted.
		Histograms: []prompb.Histogram{{Count: &prompb.Histogram_CountInt{CountInt: 2}, Sum: 1, Timestamp: 7}, {Count: &prompb.Histogram_CountInt{CountInt: 3}, Sum: 2, Timestamp: 8}},
	}
	code, _, body := ts.do("POST", "/api/v1/write", remoteBody(t, a, b, special), remoteHeaders...)
	if code != http.StatusNoContent {
		t.Fatalf("%d %s", code, body)
	}
	got := ts.all("up")
	want := map[string][]engine.Sample{
		"up,instance=h:9100,job=node value": {{Time: 1000e6, Value: f(1)}, {Time: 1001e6, Value: f(1.001)}, {Time: 1002e6, Value: f(1.002)}},
		"up,job=special value":              {{Time: 1e6, Value: f(1)}, {Time: 6e6, Value: f(-6)}},
	}
	for k, w := range want {
		if !samplesEqual(got[k], w) {
			t.Errorf("%s: got %v, want %v", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("series %v", got)
	}
	if h := ts.all("http_requests_total"); !samplesEqual(h["http_requests_total,code=200 value"],
		[]engine.Sample{{Time: 5e6, Value: f(0.005)}, {Time: 6e6, Value: f(0.006)}}) {
		t.Errorf("empty label not dropped: %v", h)
	}
	_, _, metrics := ts.do("GET", "/metrics", nil)
	if !strings.Contains(metrics, `strata_remote_write_samples_skipped_total{reason="non_finite"} 3`) ||
		!strings.Contains(metrics, `strata_remote_write_samples_skipped_total{reason="stale"} 1`) ||
		!strings.Contains(metrics, `strata_remote_write_samples_skipped_total{reason="histogram"} 2`) {
		t.Errorf("skipped samples not counted:\n%s", grepLines(metrics, "skipped"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestRemoteWriteBadBodies(t *testing.T) {
	ts := newTestServer(t, &Options{MaxBodyBytes: 4096})
	raw, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series("x", 0, 1)}}).Marshal()
	cases := []struct {
		name string
		body []byte
		hdr  []string
		want int
	}{
		{"not snappy", []byte("hello world"), remoteHeaders, 400},
		{"snappy of garbage", snappy.Encode(nil, []byte{0xff, 0xff, 0xff, 0xff}), remoteHeaders, 400},
		{"unframed protobuf", raw, remoteHeaders, 400},
		{"truncated", remoteBody(t, series("x", 0, 10))[:20], remoteHeaders, 400},
		{"empty", nil, remoteHeaders, 400},
		{"too large decoded", snappy.Encode(nil, make([]byte, 5000)), remoteHeaders, 413},
		{"remote write 2.0", remoteBody(t, series("x", 0, 1)), []string{"Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request"}, 415},
		{"zstd", remoteBody(t, series("x", 0, 1)), []string{"Content-Encoding", "zstd"}, 415},
		{"no name", remoteBody(t, prompb.TimeSeries{Labels: []prompb.Label{{Name: "a", Value: "b"}}, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}), remoteHeaders, 400},
	}
	for _, c := range cases {
		if code, _, body := ts.do("POST", "/api/v1/write", c.body, c.hdr...); code != c.want {
			t.Errorf("%s: %d, want %d (%s)", c.name, code, c.want, body)
		}
	}
	if n := ts.count("x"); n != 0 {
		t.Errorf("%d samples stored from bad bodies", n)
	}
	// A series that cannot be stored is named; the others are stored.
	bad := prompb.TimeSeries{Labels: []prompb.Label{{Name: "job", Value: "b"}}, Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}
	code, _, body := ts.do("POST", "/api/v1/write", remoteBody(t, series("ok", 0, 3), bad), remoteHeaders...)
	if code != http.StatusBadRequest || !strings.Contains(body, "no __name__") || ts.count("ok") != 3 {
		t.Errorf("partial: %d %s, stored %d", code, body, ts.count("ok"))
	}
}

// TestRemoteWriteClient sends requests with Prometheus' own remote-write
// client.
func TestRemoteWriteClient(t *testing.T) {
	ts := newTestServer(t, &Options{Token: "tok"})
	u, _ := url.Parse(ts.srv.URL + "/api/v1/write")
	client, err := remote.NewWriteClient("strata", &remote.ClientConfig{
		URL:     &config_util.URL{URL: u},
		Timeout: model.Duration(10 * time.Second),
		HTTPClientConfig: config_util.HTTPClientConfig{
			Authorization: &config_util.Authorization{Type: "Bearer", Credentials: "tok"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var all []prompb.TimeSeries
	for i := range 50 {
		all = append(all, series("node_cpu_seconds_total", int64(i)*1000, 100, "cpu", string(rune('a'+i%26)), "mode", []string{"idle", "user"}[i/26]))
	}
	for i := 0; i < len(all); i += 10 {
		if _, err := client.Store(context.Background(), remoteBody(t, all[i:i+10]...), 0); err != nil {
			t.Fatal(err)
		}
	}
	got := ts.all("node_cpu_seconds_total")
	if len(got) != 50 {
		t.Fatalf("%d series", len(got))
	}
	for _, s := range all {
		key := engine.SeriesKey("node_cpu_seconds_total", []engine.Tag{{Key: "cpu", Value: s.Labels[1].Value}, {Key: "mode", Value: s.Labels[2].Value}}, "value")
		var want []engine.Sample
		for _, smp := range s.Samples {
			want = append(want, engine.Sample{Time: smp.Timestamp * 1e6, Value: f(smp.Value)})
		}
		if !samplesEqual(got[key], want) {
			t.Errorf("%s: %d samples, want %d", key, len(got[key]), len(want))
		}
	}
	// A body the server refuses comes back as a non-recoverable error.
	if _, err := client.Store(context.Background(), []byte("garbage"), 0); err == nil {
		t.Error("garbage accepted")
	}
}
