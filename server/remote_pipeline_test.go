package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage/remote"
	"github.com/prometheus/prometheus/tsdb"

	"github.com/stratadb/strata/engine"
)

// TestPrometheusRemoteWritePipeline runs Prometheus' own remote-write
// pipeline, as a Prometheus server or agent does: samples appended to a
// TSDB go to its WAL, a queue manager tails the WAL, batches and sends
// remote-write requests; every sample must land in strata exactly.
func TestPrometheusRemoteWritePipeline(t *testing.T) {
	requests := make(chan struct{}, 1000)
	var seen atomic.Int64
	ts := newTestServer(t, &Options{Token: "tok"})
	ts.srv.Close()
	ts.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.h.ServeHTTP(w, r)
		seen.Add(1)
		select {
		case requests <- struct{}{}:
		default:
		}
	}))

	dir := t.TempDir()
	prom, err := tsdb.Open(dir, nil, nil, tsdb.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer prom.Close()
	rws := remote.NewWriteStorage(nil, nil, dir, time.Minute, nil, false)
	defer rws.Close()
	prom.SetWriteNotified(rws)
	conf, err := config.Load(fmt.Sprintf(`
remote_write:
  - url: %s/api/v1/write
    name: strata
    authorization: {type: Token, credentials: tok}
    queue_config: {batch_send_deadline: 50ms, max_samples_per_send: 300, min_backoff: 10ms}
    metadata_config: {send: false}
`, ts.srv.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rws.ApplyConfig(conf); err != nil {
		t.Fatal(err)
	}

	// The watcher sends samples newer than its start.
	t0 := time.Now().Add(time.Second).UnixMilli()
	const nSeries, nSamples = 20, 100
	want := map[string][]engine.Sample{}
	for step := range nSamples {
		app := prom.Appender(context.Background())
		for s := range nSeries {
			ls := labels.FromStrings("__name__", "node_load", "instance", fmt.Sprintf("i%02d", s), "job", "node")
			tm, v := t0+int64(step)*1000, float64(s*1000+step)/8
			if _, err := app.Append(0, ls, tm, v); err != nil {
				t.Fatal(err)
			}
			key := engine.SeriesKey("node_load", []engine.Tag{{Key: "instance", Value: fmt.Sprintf("i%02d", s)}, {Key: "job", Value: "node"}}, "value")
			want[key] = append(want[key], engine.Sample{Time: tm * 1e6, Value: engine.Float(v)})
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(60 * time.Second)
	for ts.count("node_load") < nSeries*nSamples {
		select {
		case <-requests:
		case <-deadline:
			t.Fatalf("%d of %d samples arrived in %d requests", ts.count("node_load"), nSeries*nSamples, seen.Load())
		}
	}
	got := ts.all("node_load")
	for k, w := range want {
		if !samplesEqual(got[k], w) {
			t.Errorf("%s: %d samples, want %d", k, len(got[k]), len(w))
		}
	}
	if len(got) != nSeries {
		t.Errorf("%d series", len(got))
	}
	if seen.Load() < 2 {
		t.Errorf("%d requests: the queue did not batch", seen.Load())
	}
}
