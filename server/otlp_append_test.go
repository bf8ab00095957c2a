package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// An OTLP request is one Commit: a series the engine refuses (a kind
// conflict) or one past a series limit fails the request with 400 and
// nothing of it is stored; repeated points of one series go by its ref.
func TestOTLPAtomicOnAppender(t *testing.T) {
	ts := newTestServerDB(t, &engine.Options{Sync: engine.SyncNever, MaxSeriesPerMeasurement: 3}, nil)
	ms := time.Now().Add(-time.Minute).UnixMilli()
	body := func(cells ...string) []byte {
		var pts []string
		for i, c := range cells {
			pts = append(pts, fmt.Sprintf(`{"timeUnixNano":"%d","asDouble":%d,"attributes":[{"key":"cell","value":{"stringValue":%q}}]}`, (ms+int64(i))*1e6, i, c))
		}
		return fmt.Appendf(nil, `{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"temp","gauge":{"dataPoints":[%s]}}]}]}]}`, strings.Join(pts, ","))
	}
	if code, _, resp := ts.do("POST", "/api/v1/otlp/v1/metrics", body("a", "b", "a", "a"), "Content-Type", "application/json"); code != 200 {
		t.Fatalf("%d %s", code, resp)
	}
	if got := ts.all("temp"); len(got) != 2 || len(got["temp,cell=a value"]) != 3 || len(got["temp,cell=b value"]) != 1 {
		t.Fatalf("stored %v", got)
	}
	if err := ts.db.Write([]engine.Point{{Measurement: "temp", Tags: []engine.Tag{{Key: "cell", Value: "int"}},
		Fields: []engine.Field{{Key: "value", Value: engine.Int(1)}}, Time: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cells []string
		want  string
	}{
		{[]string{"a", "int", "b"}, "conflict"},
		{[]string{"a", "c", "d"}, "series limit"},
	} {
		code, _, resp := ts.do("POST", "/api/v1/otlp/v1/metrics", body(c.cells...), "Content-Type", "application/json")
		if code != 400 || !strings.Contains(resp, c.want) {
			t.Fatalf("%v: %d %s", c.cells, code, resp)
		}
	}
	if n := ts.count("temp"); n != 5 {
		t.Fatalf("%d samples stored, want 5: a refused request stored some", n)
	}
}
