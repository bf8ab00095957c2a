package server

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"

	"github.com/stratadb/strata/engine"
)

// A request larger than one Commit whose last Commit is refused for a
// series limit: the Commits before it stay stored once, the rest goes
// through Write, which names the refused series, and every sample is
// counted once (stored, skipped or refused).
func TestRemoteWriteCommitRefusedMidRequest(t *testing.T) {
	ts := newTestServerDB(t, &engine.Options{Sync: engine.SyncNever, MaxSeriesPerMeasurement: 2}, nil)
	n := int64(remoteCommitSamples + 5000)
	a := series("up", 1, n, "job", "a")
	// Non-finite samples on both sides of the first Commit's end.
	for _, i := range []int64{10, remoteCommitSamples - 1, remoteCommitSamples + 1, n - 1} {
		a.Samples[i].Value = math.NaN()
	}
	a.Samples[remoteCommitSamples+2].Value = math.Float64frombits(value.StaleNaN)
	b := series("up", 1, 3, "job", "b")
	c := series("up", 1, 2, "job", "c")
	bad := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "job", Value: "x"}, {Name: "job", Value: "y"}},
		Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}
	code, _, resp := ts.do("POST", "/api/v1/write", remoteBody(t, a, bad, b, c), remoteHeaders...)
	if code != http.StatusBadRequest || !containsAll(resp, `job="c"`, "series limit", `duplicate label name "job"`) ||
		strings.Contains(resp, `job="b"`) || strings.Count(resp, "series {") != 2 {
		t.Fatalf("%d %s", code, resp)
	}
	got := ts.all("up")
	if len(got["up,job=a value"]) != int(n)-5 || len(got["up,job=b value"]) != 3 || len(got) != 2 {
		t.Fatalf("stored %d of a, %d of b, %d series", len(got["up,job=a value"]), len(got["up,job=b value"]), len(got))
	}
	_, _, metrics := ts.do("GET", "/metrics", nil)
	for _, want := range []string{
		"strata_remote_write_samples_total " + strconv.Itoa(int(n)-5+3),
		`strata_remote_write_samples_skipped_total{reason="non_finite"} 4`,
		`strata_remote_write_samples_skipped_total{reason="stale"} 1`,
		`strata_remote_write_series_refused_total{reason="duplicate_label"} 1`,
		`strata_remote_write_series_refused_total{reason="engine"} 1`,
		"strata_series_limit_refusals_total 1",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("no %q in\n%s", want, grepLines(metrics, "strata_remote_write"))
		}
	}
}

// A series the engine refuses at Append (a kind conflict) is refused
// whole on the appender path, named in the 400, and the others stored.
func TestRemoteWriteAppendRefused(t *testing.T) {
	ts := newTestServer(t, nil)
	if err := ts.db.Write([]engine.Point{{Measurement: "temp", Tags: []engine.Tag{{Key: "job", Value: "int"}},
		Fields: []engine.Field{{Key: "value", Value: engine.Int(1)}}, Time: 1}}); err != nil {
		t.Fatal(err)
	}
	code, _, resp := ts.do("POST", "/api/v1/write", remoteBody(t,
		series("temp", 1000, 2, "job", "a"), series("temp", 1000, 3, "job", "int"), series("temp", 1000, 2, "job", "b")), remoteHeaders...)
	if code != http.StatusBadRequest || !containsAll(resp, `job="int"`, "conflict") || strings.Contains(resp, `job="a"`) {
		t.Fatalf("%d %s", code, resp)
	}
	got := ts.all("temp")
	if len(got["temp,job=a value"]) != 2 || len(got["temp,job=b value"]) != 2 || len(got["temp,job=int value"]) != 1 {
		t.Fatalf("stored %v", got)
	}
	_, _, metrics := ts.do("GET", "/metrics", nil)
	if !strings.Contains(metrics, `strata_remote_write_series_refused_total{reason="type_conflict"} 1`) {
		t.Errorf("not counted:\n%s", grepLines(metrics, "refused"))
	}
}
