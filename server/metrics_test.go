package server

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestMetricsParse(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.do("POST", "/api/v2/write", []byte("mx v=1 1\nmx v=2 2\n"))
	ts.do("POST", "/api/v2/write", []byte("mx v=oops 3\n"))
	ts.do("GET", "/ping", nil)
	if err := ts.db.Flush(); err != nil {
		t.Fatal(err)
	}
	code, hdr, body := ts.do("GET", "/metrics", nil)
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("%d %s", code, hdr.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("expfmt: %v", err)
	}
	value := func(name string, lbls ...string) (float64, bool) {
		fam, ok := fams[name]
		if !ok {
			return 0, false
		}
	metrics:
		for _, m := range fam.Metric {
			for i := 0; i+1 < len(lbls); i += 2 {
				if labelValue(m, lbls[i]) != lbls[i+1] {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
		return 0, false
	}
	checks := []struct {
		name string
		lbls []string
		want float64
	}{
		{"strata_http_requests_total", []string{"handler", "influx_write_v2", "code", "204"}, 1},
		{"strata_http_requests_total", []string{"handler", "influx_write_v2", "code", "400"}, 1},
		{"strata_http_requests_total", []string{"handler", "ping", "code", "204"}, 1},
		{"strata_http_request_duration_seconds", []string{"handler", "influx_write_v2"}, 2},
		{"strata_http_points_written_total", nil, 2},
		{"strata_http_lines_rejected_total", nil, 1},
		{"strata_points_written_total", nil, 2},
		{"strata_samples_written_total", nil, 2},
		{"strata_series", nil, 1},
		{"strata_flushes_total", nil, 1},
		{"strata_segments", []string{"level", "0"}, 1},
		{"strata_immutable_memtables", nil, 0},
	}
	for _, c := range checks {
		got, ok := value(c.name, c.lbls...)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.lbls, got, ok, c.want)
		}
	}
	for _, name := range []string{"strata_disk_bytes", "strata_wal_bytes", "strata_write_stalls_total",
		"strata_compactions_total", "strata_write_amplification", "strata_remote_write_samples_skipped_total",
		"go_goroutines"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	if fams["strata_http_request_duration_seconds"].GetType() != dto.MetricType_HISTOGRAM {
		t.Error("latency is no histogram")
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
