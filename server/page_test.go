package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// maxFirstLoad bounds the bytes of the page's first load, gzip-compressed.
const maxFirstLoad = 200 << 10

// pageFiles are the page's files as index.html names them.
var pageFiles = []string{"/", "/ui/app.js", "/ui/style.css", "/ui/vendor/uPlot.iife.min.js", "/ui/vendor/uPlot.min.css"}

func TestPageWithoutToken(t *testing.T) {
	ts := newTestServer(t, &Options{Token: "s3cret"})
	for _, p := range pageFiles {
		for _, m := range []string{http.MethodGet, http.MethodHead} {
			code, hdr, body := ts.do(m, p, nil)
			if code != http.StatusOK {
				t.Fatalf("%s %s without token: %d %s", m, p, code, body)
			}
			if hdr.Get("Content-Security-Policy") == "" || hdr.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s %s: headers %v", m, p, hdr)
			}
		}
	}
	_, hdr, body := ts.do(http.MethodGet, "/", nil)
	if !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") || !strings.Contains(body, "/ui/app.js") {
		t.Fatalf("GET /: %v %.200s", hdr, body)
	}
	// The page knows to ask for a token before its first data request.
	if !strings.Contains(body, `data-auth="token"`) {
		t.Errorf("GET / of a server with a token: no data-auth mark")
	}
	if _, _, body := newTestServer(t, nil).do(http.MethodGet, "/", nil); !strings.Contains(body, pageAuthMark) {
		t.Errorf("GET / of a server without a token: no empty data-auth mark")
	}
	// Data stays behind the token, and so does everything not in the list.
	for _, p := range []string{StatusPath, "/api/v1/query_range?query=up", "/api/v1/series?match[]=up", "/api/v1/labels", "/metrics"} {
		if code, _, _ := ts.do(http.MethodGet, p, nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s without token: %d, want 401", p, code)
		}
	}
	if code, _, _ := ts.do(http.MethodGet, StatusPath, nil, "Authorization", "Token s3cret"); code != http.StatusOK {
		t.Errorf("GET %s with token: %d", StatusPath, code)
	}
	// Anything else is 401 without the token (checked before routing), and
	// 404 (or 405 for another method on /) with it.
	tok := []string{"Authorization", "Token s3cret"}
	for _, p := range []string{"/ui/", "/ui", "/index.html", "/ui/index.html", "/ui/vendor/", "/ui/../server.go", "/nope", "/ui/vendor/README.md"} {
		if code, _, _ := ts.do(http.MethodGet, p, nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s without token: %d, want 401", p, code)
		}
		if code, _, _ := ts.do(http.MethodGet, p, nil, tok...); code != http.StatusNotFound {
			t.Errorf("GET %s with token: %d, want 404", p, code)
		}
	}
	if code, _, _ := ts.do(http.MethodPost, "/", []byte("x")); code != http.StatusUnauthorized {
		t.Errorf("POST / without token: %d, want 401", code)
	}
	if code, _, _ := ts.do(http.MethodPost, "/", []byte("x"), tok...); code != http.StatusMethodNotAllowed {
		t.Errorf("POST / with token: %d, want 405", code)
	}
}

func TestIsPagePath(t *testing.T) {
	for _, p := range pageFiles {
		if !isPagePath(http.MethodGet, p) || !isPagePath(http.MethodHead, p) {
			t.Errorf("isPagePath(GET/HEAD, %q) = false", p)
		}
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions, "BREW"} {
			if isPagePath(m, p) {
				t.Errorf("isPagePath(%s, %q) = true", m, p)
			}
		}
	}
	for _, p := range []string{"", "/ping", "/health", "/metrics", StatusPath, "/api/v1/query", "/ui/", "/ui",
		"/ui/app.js/", "/ui//app.js", "/UI/app.js", "/ui/app.js?x", "/ui/vendor/README.md", "//", "/index.html"} {
		if isPagePath(http.MethodGet, p) {
			t.Errorf("isPagePath(GET, %q) = true", p)
		}
	}
	n := 0
	for p := range loadPage() {
		if p != "/" && !strings.HasPrefix(p, "/ui/") {
			t.Errorf("page asset %q outside /ui/", p)
		}
		n++
	}
	if n > 8 {
		t.Errorf("%d page assets: the allow-list should stay small", n)
	}
	// The binary carries the files as they are (the gzip copies are made
	// at run time): they must stay well under the 500 KB the page may add.
	raw := 0
	for _, a := range loadPage() {
		raw += len(a.raw)
	}
	if raw > 200<<10 {
		t.Errorf("page files %d bytes", raw)
	}
}

// TestPageGzip checks that the page's files come gzip-compressed when the
// client accepts it, identical once decompressed, and that the first
// load stays under its budget.
func TestPageGzip(t *testing.T) {
	ts := newTestServer(t, nil)
	total := 0
	for _, p := range pageFiles {
		req, _ := http.NewRequest(http.MethodGet, ts.srv.URL+p, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := http.DefaultTransport.RoundTrip(req) // no transparent decompression
		if err != nil {
			t.Fatal(err)
		}
		zb, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("%s: Content-Encoding %q", p, resp.Header.Get("Content-Encoding"))
		}
		if resp.Header.Get("Vary") != "Accept-Encoding" {
			t.Errorf("%s: Vary %q", p, resp.Header.Get("Vary"))
		}
		zr, err := gzip.NewReader(bytes.NewReader(zb))
		if err != nil {
			t.Fatal(err)
		}
		plain, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		_, _, raw := ts.do(http.MethodGet, p, nil, "Accept-Encoding", "identity")
		if string(plain) != raw || len(raw) == 0 {
			t.Fatalf("%s: gzip body differs from the plain one", p)
		}
		total += len(zb)

		etag := resp.Header.Get("ETag")
		if code, _, _ := ts.do(http.MethodGet, p, nil, "If-None-Match", etag); code != http.StatusNotModified {
			t.Errorf("%s with If-None-Match %s: %d", p, etag, code)
		}
	}
	t.Logf("first load: %d bytes gzip", total)
	if total > maxFirstLoad {
		t.Fatalf("first load %d bytes gzip, budget %d", total, maxFirstLoad)
	}
	for _, h := range []string{"gzip;q=0", "identity", "br", ""} {
		_, hdr, _ := ts.do(http.MethodGet, "/ui/app.js", nil, "Accept-Encoding", h)
		if hdr.Get("Content-Encoding") != "" {
			t.Errorf("Accept-Encoding %q: got %q", h, hdr.Get("Content-Encoding"))
		}
	}
}

// writeKnown writes the data the page tests look at: two measurements,
// one sample a minute for the last three hours, ending a minute ago.
func writeKnown(t testing.TB, db *engine.DB, now time.Time) {
	t.Helper()
	end := now.Truncate(time.Minute).Add(-time.Minute)
	var pts []engine.Point
	for i := 0; i < 180; i++ {
		ts := end.Add(-time.Duration(i) * time.Minute).UnixNano()
		for r, room := range []string{"cellar", "kitchen"} {
			pts = append(pts, engine.Point{
				Measurement: "climate",
				Tags:        []engine.Tag{{Key: "room", Value: room}, {Key: "host", Value: "gw1"}},
				Fields: []engine.Field{
					{Key: "temperature_celsius", Value: engine.Float(12 + float64(r)*8 + float64(i%13)/4)},
					{Key: "humidity", Value: engine.Int(int64(40 + r*10 + i%7))},
				},
				Time: ts,
			})
		}
		for p, phase := range []string{"L1", "L2", "L3"} {
			pts = append(pts, engine.Point{
				Measurement: "power",
				Tags:        []engine.Tag{{Key: "phase", Value: phase}},
				Fields:      []engine.Field{{Key: "watts", Value: engine.Float(100*float64(p+1) + float64(i%11))}},
				Time:        ts,
			})
		}
	}
	if err := db.Write(pts); err != nil {
		t.Fatal(err)
	}
}

func TestStatusEndpoint(t *testing.T) {
	now := time.Now()
	fwd := ForwardStatus{Protocol: "prometheus", Lag: 1500 * time.Millisecond, BacklogSamples: 42, BacklogBytes: 4096,
		SamplesSent: 7, LastSuccess: now.Add(-time.Second), LastError: "remote: 503"}
	mq := MQTTStatus{Connected: true, Broker: "127.0.0.1:1883", Topics: []string{"sensors/#"}, Messages: 9, Points: 18}
	ts := newTestServer(t, &Options{
		ForwardStatus: func() ForwardStatus { return fwd },
		MQTTStatus:    func() MQTTStatus { return mq },
	})
	writeKnown(t, ts.db, now)
	if err := ts.db.Flush(); err != nil {
		t.Fatal(err)
	}
	code, hdr, body := ts.do(http.MethodGet, StatusPath+"?match[]="+url.QueryEscape(`{__name__=~"climate_.+",room="kitchen"}`), nil)
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("status: %d %s", code, body)
	}
	var resp struct {
		Status string
		Data   struct {
			Measurements []string
			DB           map[string]any
			Forward      map[string]any
			MQTT         map[string]any
			Latest       []struct {
				Metric map[string]string
				Value  [2]json.RawMessage
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	d := resp.Data
	if strings.Join(d.Measurements, ",") != "climate,power" {
		t.Errorf("measurements %v", d.Measurements)
	}
	st := ts.db.Stats()
	if d.DB["series"].(float64) != float64(st.Series) || st.Series != 7 {
		t.Errorf("series %v, Stats %d", d.DB["series"], st.Series)
	}
	if d.DB["diskBytes"].(float64) <= 0 || d.DB["segmentSamples"].(float64) != 180*7 {
		t.Errorf("db %v", d.DB)
	}
	if bps := d.DB["bytesPerSample"].(float64); bps <= 0 || bps > 16 {
		t.Errorf("bytesPerSample %v", bps)
	}
	if d.Forward["lagSeconds"] != 1.5 || d.Forward["backlogSamples"] != 42.0 || d.Forward["lastError"] != "remote: 503" || d.Forward["protocol"] != "prometheus" {
		t.Errorf("forward %v", d.Forward)
	}
	if d.MQTT["connected"] != true || d.MQTT["broker"] != "127.0.0.1:1883" || d.MQTT["points"] != 18.0 {
		t.Errorf("mqtt %v", d.MQTT)
	}

	// The latest values are db.Last's, as the query API names them.
	last, err := ts.db.Last(context.Background(), engine.Selector{Measurement: "climate", Tags: []engine.Tag{{Key: "room", Value: "kitchen"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Latest) != len(last) || len(last) != 2 {
		t.Fatalf("latest %v, Last %v", d.Latest, last)
	}
	for i, s := range last {
		got := d.Latest[i]
		want := toMillis(s.Samples)[0]
		if got.Metric["__name__"] != MetricName(s.Measurement, s.Field) || got.Metric["room"] != "kitchen" || got.Metric["host"] != "gw1" {
			t.Errorf("latest %d: metric %v, want %v", i, got.Metric, s)
		}
		var sec float64
		var val string
		json.Unmarshal(got.Value[0], &sec)
		json.Unmarshal(got.Value[1], &val)
		if int64(math.Round(sec*1000)) != want.t || val != strconv.FormatFloat(want.f, 'g', -1, 64) {
			t.Errorf("latest %d: %v %q, want %d %v", i, sec, val, want.t, want.f)
		}
	}

	// Without hooks, no forward or mqtt; a bad selector is a 400.
	ts2 := newTestServer(t, nil)
	_, _, body = ts2.do(http.MethodGet, StatusPath, nil)
	if strings.Contains(body, `"forward"`) || strings.Contains(body, `"mqtt"`) || !strings.Contains(body, `"latest":[]`) {
		t.Errorf("status without hooks: %s", body)
	}
	if code, _, body := ts2.do(http.MethodGet, StatusPath+"?match[]=%7B", nil); code != http.StatusBadRequest {
		t.Errorf("bad match[]: %d %s", code, body)
	}
}

// TestStatusRate checks the ingest rate: points written between two
// status requests a known time apart.
func TestStatusRate(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	ts := newTestServer(t, &Options{Now: func() time.Time { return clock }})
	pts := make([]engine.Point, 500)
	for i := range pts {
		pts[i] = engine.Point{Measurement: "m", Fields: []engine.Field{{Key: "a", Value: f(1)}, {Key: "b", Value: f(2)}}, Time: int64(i + 1)}
	}
	if err := ts.db.Write(pts); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(2 * time.Second)
	_, _, body := ts.do(http.MethodGet, StatusPath, nil)
	db := decodeJSON(t, body)["data"].(map[string]any)["db"].(map[string]any)
	if db["pointsPerSecond"] != 250.0 || db["samplesPerSecond"] != 500.0 {
		t.Fatalf("rates %v %v, want 250 500", db["pointsPerSecond"], db["samplesPerSecond"])
	}
}

// FuzzPageHeaders feeds the request headers the page's handler parses.
func FuzzPageHeaders(f *testing.F) {
	for _, s := range []string{"gzip", "gzip;q=0", "br, gzip;q=0.5", "*", "identity", "GZIP ; Q=1", "gzip;q=", ";;,,", `W/"abc", "def"`, "*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		g := acceptsGzip(h)
		if g && !strings.Contains(strings.ToLower(h), "gzip") && !strings.Contains(h, "*") {
			t.Fatalf("acceptsGzip(%q) without gzip or *", h)
		}
		if etagMatch(h, `"x"`) && !strings.Contains(h, `"x"`) && !strings.Contains(h, "*") {
			t.Fatalf("etagMatch(%q) without the tag or *", h)
		}
	})
}
