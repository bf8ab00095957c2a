package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/stratadb/strata/engine"
)

// A remote write through the appender refuses a series whose kind
// conflicts (all of its samples, named once), stores the others, and
// commits a request of more than remoteBatch samples in several batches
// with every sample stored.
func TestRemoteWriteAppender(t *testing.T) {
	ts := newTestServer(t, nil)
	if err := ts.db.Write([]engine.Point{{Measurement: "clash", Fields: []engine.Field{{Key: "value", Value: engine.Int(1)}}, Time: 1}}); err != nil {
		t.Fatal(err)
	}
	var many []prompb.TimeSeries
	for i := range 30 {
		many = append(many, series("many", 0, remoteBatch/10, "i", fmt.Sprint(i)))
	}
	reqSeries := append([]prompb.TimeSeries{series("ok", 0, 3)}, many...)
	reqSeries = append(reqSeries, series("clash", 10, 4), series("ok", 3, 2, "x", "y"))
	code, _, body := ts.do("POST", "/api/v1/write", remoteBody(t, reqSeries...), remoteHeaders...)
	if code != http.StatusBadRequest || strings.Count(body, `series {__name__="clash"}`) != 1 || !strings.Contains(body, "field type conflict") {
		t.Fatalf("%d %s", code, body)
	}
	if n := ts.count("ok"); n != 5 {
		t.Errorf("ok: %d samples", n)
	}
	if n := ts.count("many"); n != 30*remoteBatch/10 {
		t.Errorf("many: %d samples, want %d", n, 30*remoteBatch/10)
	}
	if got := ts.all("clash"); len(got) != 1 || len(got["clash value"]) != 1 {
		t.Errorf("clash: %v", got)
	}
	// Again, now that the series are known: refs are resolved afresh.
	code, _, body = ts.do("POST", "/api/v1/write", remoteBody(t, series("ok", 100, 2)), remoteHeaders...)
	if code != http.StatusNoContent {
		t.Fatalf("%d %s", code, body)
	}
	if n := ts.count("ok"); n != 7 {
		t.Errorf("ok: %d samples", n)
	}
}
