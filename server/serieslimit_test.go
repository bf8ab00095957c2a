package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
)

// Past the DB's series limit, the write endpoints store what fits, answer
// 400 naming what was refused, and count the refusals on /metrics.
func TestSeriesLimitWrites(t *testing.T) {
	ts := newTestServerDB(t, &engine.Options{Sync: engine.SyncNever, MaxSeriesPerMeasurement: 2}, nil)
	code, _, resp := ts.do("POST", "/api/v2/write", []byte("sl,h=a v=1 1\nsl,h=b v=1 1\nsl,h=c v=1 1\nsl,h=a v=2 2\n"))
	if code != http.StatusBadRequest || !containsAll(resp, "partial write", "line 3:", "series limit") || strings.Contains(resp, "line 4:") {
		t.Fatalf("v2: %d %s", code, resp)
	}
	if n := ts.count("sl"); n != 3 {
		t.Fatalf("v2 stored %d samples, want 3 (two series)", n)
	}
	code, _, resp = ts.do("POST", "/write?db=x", []byte("sl,h=z v=1 1\nsl,h=b v=2 2\n"))
	if code != http.StatusBadRequest || !containsAll(resp, "line 1:", "series limit") {
		t.Fatalf("v1: %d %s", code, resp)
	}

	// Remote write: the series that fit are stored, the refused one named.
	code, _, resp = ts.do("POST", "/api/v1/write", remoteBody(t,
		series("up", 1000, 2, "job", "a"), series("up", 1000, 2, "job", "b"),
		series("up", 1000, 2, "job", "c")), remoteHeaders...)
	if code != http.StatusBadRequest || !containsAll(resp, `job="c"`, "series limit") || strings.Contains(resp, `job="b"`) {
		t.Fatalf("remote: %d %s", code, resp)
	}
	got := ts.all("up")
	if len(got) != 2 || len(got["up,job=a value"]) != 2 || len(got["up,job=b value"]) != 2 {
		t.Fatalf("remote stored %v", got)
	}
	_, _, metrics := ts.do("GET", "/metrics", nil)
	if !strings.Contains(metrics, "strata_oldest_kept_timestamp_seconds 0") {
		t.Errorf("no oldest-kept gauge:\n%s", grepLines(metrics, "oldest"))
	}
	if !strings.Contains(metrics, "strata_series_limit_refusals_total 3") {
		t.Fatalf("refusals not counted:\n%s", grepLines(metrics, "series_limit"))
	}
}
