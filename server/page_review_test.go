package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/stratadb/strata/engine"
)

// TestPageETagPerEncoding checks that the gzip and the plain bodies of a
// page file carry different entity tags: a cache that holds the gzip body
// must not answer a client without gzip with a 304 for it.
func TestPageETagPerEncoding(t *testing.T) {
	ts := newTestServer(t, nil)
	for _, p := range pageFiles {
		req, _ := http.NewRequest(http.MethodGet, ts.srv.URL+p, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("%s: not gzip", p)
		}
		gzTag := resp.Header.Get("ETag")
		_, hdr, _ := ts.do(http.MethodGet, p, nil, "Accept-Encoding", "identity")
		plainTag := hdr.Get("ETag")
		if gzTag == "" || plainTag == "" || gzTag == plainTag {
			t.Errorf("%s: ETag gzip %s, plain %s: want two different tags", p, gzTag, plainTag)
		}
		// The gzip body's tag does not validate the plain body, and each
		// tag validates its own.
		if code, _, body := ts.do(http.MethodGet, p, nil, "Accept-Encoding", "identity", "If-None-Match", gzTag); code != http.StatusOK || body == "" {
			t.Errorf("%s: plain request with the gzip tag: %d, want 200 and the body", p, code)
		}
		if code, _, _ := ts.do(http.MethodGet, p, nil, "Accept-Encoding", "identity", "If-None-Match", plainTag); code != http.StatusNotModified {
			t.Errorf("%s: plain request with its own tag: %d, want 304", p, code)
		}
		req.Header.Set("If-None-Match", gzTag)
		resp, err = http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotModified {
			t.Errorf("%s: gzip request with its own tag: %d, want 304", p, resp.StatusCode)
		}
	}
}

// TestPageFrameOptions checks that the page refuses to be framed in
// browsers that do not know CSP's frame-ancestors as well.
func TestPageFrameOptions(t *testing.T) {
	ts := newTestServer(t, &Options{Token: "t"})
	for _, p := range pageFiles {
		_, hdr, _ := ts.do(http.MethodGet, p, nil)
		if hdr.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: X-Frame-Options %q, want DENY", p, hdr.Get("X-Frame-Options"))
		}
		if !strings.Contains(hdr.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s: CSP %q", p, hdr.Get("Content-Security-Policy"))
		}
	}
}

// TestStatusNotCached checks that the status endpoint's live figures are
// never stored by a browser or a proxy, and are not sniffed.
func TestStatusNotCached(t *testing.T) {
	ts := newTestServer(t, &Options{Token: "t"})
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		code, hdr, body := ts.do(m, StatusPath, nil, "Authorization", "Token t")
		if code != http.StatusOK {
			t.Fatalf("%s status: %d %s", m, code, body)
		}
		if hdr.Get("Cache-Control") != "no-store" {
			t.Errorf("%s status: Cache-Control %q, want no-store", m, hdr.Get("Cache-Control"))
		}
		if hdr.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s status: X-Content-Type-Options %q", m, hdr.Get("X-Content-Type-Options"))
		}
	}
	// An error answer is live too.
	code, hdr, _ := ts.do(http.MethodGet, StatusPath+"?limit=x", nil, "Authorization", "Token t")
	if code != http.StatusBadRequest || hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("bad limit: %d, Cache-Control %q", code, hdr.Get("Cache-Control"))
	}
}

// TestStatusRedactsURLSecrets checks that the status endpoint (and so the
// page) never shows the credentials a forwarder's or a broker's URL may
// carry, which an error message from net/http quotes: the password of
// the user info and the values of the query.
func TestStatusRedactsURLSecrets(t *testing.T) {
	fwdErr := `Post "http://influx.example:8086/write?db=edge&u=me&p=hunter2": dial tcp 10.0.0.1:8086: connect: connection refused`
	ts := newTestServer(t, &Options{
		ForwardStatus: func() ForwardStatus {
			return ForwardStatus{Protocol: "influx", LastError: fwdErr}
		},
		MQTTStatus: func() MQTTStatus {
			return MQTTStatus{Broker: "tcp://bob:swordfish@broker.example:1883",
				LastError: "connect tcp://bob:swordfish@broker.example:1883?token=opensesame: refused"}
		},
	})
	code, _, body := ts.do(http.MethodGet, StatusPath, nil)
	if code != http.StatusOK {
		t.Fatalf("status: %d %s", code, body)
	}
	for _, secret := range []string{"hunter2", "swordfish", "opensesame"} {
		if strings.Contains(body, secret) {
			t.Errorf("status shows %q: %s", secret, body)
		}
	}
	d := decodeJSON(t, body)["data"].(map[string]any)
	fe := d["forward"].(map[string]any)["lastError"].(string)
	// What is not secret stays, to tell what failed.
	if !strings.Contains(fe, "influx.example:8086/write") || !strings.Contains(fe, "connection refused") {
		t.Errorf("forward lastError %q lost what failed", fe)
	}
	mq := d["mqtt"].(map[string]any)
	if b := mq["broker"].(string); !strings.Contains(b, "broker.example:1883") || !strings.Contains(mq["lastError"].(string), "refused") {
		t.Errorf("mqtt %v lost what failed", mq)
	}
}

// TestSnapshotCrossOrigin checks that a page of another site cannot make
// the operator's browser take snapshots (each holds the database's files
// on disk) through a form or a no-cors fetch, while clients that are no
// browser (strata backup, curl, Prometheus tooling) still can.
func TestSnapshotCrossOrigin(t *testing.T) {
	ts := newTestServer(t, nil)
	snaps := func() int {
		es, _ := os.ReadDir(SnapshotDir(ts.db.Dir()))
		return len(es)
	}
	for _, h := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Origin", "http://evil.example"},
	} {
		code, _, body := ts.do(http.MethodPost, "/api/v1/admin/snapshot", nil, h...)
		if code != http.StatusForbidden {
			t.Errorf("snapshot with %s: %d %s, want 403", h, code, body)
		}
	}
	if n := snaps(); n != 0 {
		t.Fatalf("%d snapshots taken by cross-origin requests", n)
	}
	host := strings.TrimPrefix(ts.srv.URL, "http://")
	for _, h := range [][]string{
		nil,
		{"Sec-Fetch-Site", "same-origin"},
		{"Origin", "http://" + host},
	} {
		if code, _, body := ts.do(http.MethodPost, "/api/v1/admin/snapshot", nil, h...); code != http.StatusOK {
			t.Errorf("snapshot with %v: %d %s, want 200", h, code, body)
		}
	}
	if n := snaps(); n != 3 {
		t.Errorf("%d snapshots, want 3", n)
	}
}

// hostileMeasurements are names built to break the page: markup, quotes
// and backslashes, regexp syntax, and U+FFFD (which PromQL's lexer
// refuses as is inside a string).
var hostileMeasurements = []string{
	`x"</script><img src=x onerror="window.pwned=1">`,
	"bad\ufffdname",
	`re.(x)|y*+?[a]{2}^$\d`,
}

// TestPageBrowserHostileNames drives the page over series whose names and
// tag values are hostile: nothing of them runs, every measurement lists
// its series with their latest values, every series charts, and the tag
// filter tells a NUL value from "any".
func TestPageBrowserHostileNames(t *testing.T) {
	exe := chromiumPath(t)
	ts := newTestServer(t, nil)
	now := time.Now()
	var pts []engine.Point
	for i := 1; i <= 30; i++ {
		at := now.Add(-time.Duration(i) * time.Minute).UnixNano()
		pts = append(pts,
			engine.Point{Measurement: hostileMeasurements[0],
				Tags:   []engine.Tag{{Key: "room", Value: `<svg onload="window.pwned=2">`}},
				Fields: []engine.Field{{Key: "f<b>", Value: engine.Float(float64(i))}}, Time: at},
			engine.Point{Measurement: hostileMeasurements[0],
				Tags:   []engine.Tag{{Key: "room", Value: `a\"b\\c'` + "\t"}},
				Fields: []engine.Field{{Key: "f<b>", Value: engine.Float(float64(2 * i))}}, Time: at},
			engine.Point{Measurement: hostileMeasurements[1],
				Tags:   []engine.Tag{{Key: "k", Value: "\x00"}},
				Fields: []engine.Field{{Key: "value", Value: engine.Float(float64(3 * i))}}, Time: at},
			engine.Point{Measurement: hostileMeasurements[1],
				Tags:   []engine.Tag{{Key: "k", Value: "y\ufffd"}},
				Fields: []engine.Field{{Key: "value", Value: engine.Float(float64(4 * i))}}, Time: at},
			engine.Point{Measurement: hostileMeasurements[2],
				Fields: []engine.Field{{Key: "v", Value: engine.Float(float64(5 * i))}}, Time: at},
		)
	}
	if err := ts.db.Write(pts); err != nil {
		t.Fatal(err)
	}

	ctx := newBrowser(t, exe, 2*time.Minute)
	bl := watchBrowser(t, ctx)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	eval := func(expr string, v any) {
		t.Helper()
		b, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr))
		must(err)
		must(json.Unmarshal(b, v))
	}
	poll := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
			var shown string
			eval(`document.getElementById("error").textContent`, &shown)
			t.Fatalf("%s: waiting for %s: %v (page error %q)", what, expr, err, shown)
		}
	}
	js := func(s string) string { b, _ := json.Marshal(s); return string(b) }

	must(chromedp.Do(ctx, chromedp.Navigate(ts.srv.URL+"/")))
	poll("load", `document.body.dataset.ready === "true" && document.querySelectorAll("#measurements button").length === 3`)
	var meas []string
	eval(`[...document.querySelectorAll("#measurements button")].map(b => b.dataset.measurement)`, &meas)
	want, _ := ts.db.Measurements(ctx)
	if strings.Join(meas, "\n") != strings.Join(want, "\n") {
		t.Fatalf("measurements %q, want %q", meas, want)
	}

	wantSeries := map[string]int{hostileMeasurements[0]: 2, hostileMeasurements[1]: 2, hostileMeasurements[2]: 1}
	for _, m := range hostileMeasurements {
		must(chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("#measurements button")].find(b => b.dataset.measurement === `+js(m)+`).click()`)))
		n := wantSeries[m]
		poll(m, fmt.Sprintf(`window.strata.measurement === %s && document.querySelectorAll("#series button").length === %d &&
			[...document.querySelectorAll("#series button")].every(b => b.dataset.key.startsWith(%[1]s))`, js(m), n))
		// The latest values come with the status refresh of this
		// measurement, which must not fail.
		poll(m+": latest values", `[...document.querySelectorAll("#series button")].every(b => b.dataset.value !== undefined)`)
		var shown []struct{ Key, Value string }
		eval(`[...document.querySelectorAll("#series button")].map(b => ({key: b.dataset.key, value: b.dataset.value}))`, &shown)
		for _, s := range shown {
			if v, err := strconv.ParseFloat(s.Value, 64); err != nil || v <= 0 {
				t.Errorf("%s: latest %q", s.Key, s.Value)
			}
		}
		// Every series charts, each with its own points.
		must(chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.strata.selected.clear(); [...document.querySelectorAll("#series button")].forEach(b => b.click())`)))
		poll(m+": chart", fmt.Sprintf(`window.strata.plot !== null && window.strata.plot.series.length === %d &&
			window.strata.plot.series.slice(1).every(s => s.label.startsWith(%s)) &&
			window.strata.plot.data.slice(1).every(a => a.filter(v => v !== null).length >= 25)`, n+1, js(m)))
		var errText string
		eval(`document.getElementById("error").textContent`, &errText)
		if errText != "" {
			t.Errorf("%s: page error %q", m, errText)
		}
	}

	// The tag filter of measurement 1: the value NUL is not "any".
	must(chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("#measurements button")].find(b => b.dataset.measurement === `+js(hostileMeasurements[1])+`).click()`)))
	poll("NUL filter", `document.querySelectorAll("#series button").length === 2 && document.querySelector('#tagfilters select[data-tag="k"]') !== null`)
	must(chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('#tagfilters select[data-tag="k"]');
		s.selectedIndex = [...s.options].findIndex((o, i) => i > 0 && o.textContent === "\u0000"); s.dispatchEvent(new Event("change")); })()`)))
	var listed []string
	eval(`[...document.querySelectorAll("#series button")].map(b => b.dataset.key)`, &listed)
	if len(listed) != 1 || !strings.Contains(listed[0], "k=\"\x00\"") {
		t.Errorf("k = NUL lists %q, want the one series", listed)
	}

	// Nothing of the names ran or became markup.
	var pwned any
	eval(`window.pwned === undefined ? null : window.pwned`, &pwned)
	var injected int
	eval(`document.querySelectorAll("img, svg, script:not([src])").length`, &injected)
	if pwned != nil || injected != 0 {
		t.Errorf("hostile names ran: pwned %v, %d injected elements", pwned, injected)
	}
	bl.check(t)
}

// TestPageBrowserMeasurementRace selects a measurement and, before its
// series arrive, another one: the list must end up the second's, not the
// first's that came in late.
func TestPageBrowserMeasurementRace(t *testing.T) {
	ctx, must, run, poll := openKnownPage(t)
	// Hold the series request of "climate" until the test releases it, and
	// tell when the page has read its answer.
	run(`(() => {
		const orig = window.fetch;
		let release;
		const gate = new Promise((r) => { release = r; });
		window.releaseHeld = () => release();
		window.heldRead = false;
		window.fetch = (path, opts) => {
			if (path !== "/api/v1/series" || !String(opts.body).includes("climate")) return orig(path, opts);
			return gate.then(() => orig(path, opts)).then((r) => {
				const json = r.json.bind(r);
				r.json = () => json().then((v) => { window.heldRead = true; return v; });
				return r;
			});
		};
	})()`)
	run(`document.querySelector('#measurements button[data-measurement="climate"]').click()`)
	run(`document.querySelector('#measurements button[data-measurement="power"]').click()`)
	inPower := `window.strata.measurement === "power" && document.querySelectorAll("#series button").length === 3 &&
		[...document.querySelectorAll("#series button")].every(b => b.dataset.key.startsWith("power_"))`
	poll(inPower)
	run(`window.releaseHeld()`)
	poll(`window.heldRead === true`)
	// The page's reaction to the late answer ran in the same task as its
	// reading; what it shows now is what it keeps.
	var ok bool
	b, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](inPower))
	must(err)
	must(json.Unmarshal(b, &ok))
	if !ok {
		var keys []string
		b, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](`[window.strata.measurement, ...[...document.querySelectorAll("#series button")].map(b => b.dataset.key)]`))
		must(err)
		must(json.Unmarshal(b, &keys))
		t.Errorf("after the late answer for climate, the page shows %q, want power's series", keys)
	}
}

// TestPageBrowserLatestAfterSelect selects a measurement while a status
// request is under way: the latest values of the measurement selected
// must come without waiting for the next periodic refresh (stopped here).
func TestPageBrowserLatestAfterSelect(t *testing.T) {
	_, _, run, poll := openKnownPage(t)
	// No periodic refresh; the next status request is held until released.
	run(`(() => {
		window.strata.timers.forEach(clearInterval);
		const orig = window.fetch;
		let release;
		const gate = new Promise((r) => { release = r; });
		window.releaseHeld = () => release();
		window.held = 0;
		window.fetch = (path, opts) => {
			if (path !== "/api/v1/status/strata" || window.held++ > 0) return orig(path, opts);
			return gate.then(() => orig(path, opts));
		};
	})()`)
	run(`document.querySelector('#measurements button[data-measurement="climate"]').click()`)
	poll(`window.held === 1 && document.querySelectorAll("#series button").length === 4`)
	run(`document.querySelector('#measurements button[data-measurement="power"]').click()`)
	poll(`document.querySelectorAll("#series button").length === 3 &&
		[...document.querySelectorAll("#series button")].every(b => b.dataset.key.startsWith("power_"))`)
	run(`window.releaseHeld()`)
	poll(`[...document.querySelectorAll("#series button")].every(b => b.dataset.value !== undefined)`)
}

// TestCrossSiteWritesRefused checks that, with no token set, a page of
// another site cannot write through the operator's browser (a form posting
// line protocol needs no preflight), on any write endpoint, while a
// same-origin page, clients that are no browser and reads still work.
func TestCrossSiteWritesRefused(t *testing.T) {
	ts := newTestServer(t, nil)
	line := []byte("csrf,host=a value=1 1000000000\n")
	for _, path := range []string{"/write?db=x", "/api/v2/write?bucket=x", "/api/v1/write", "/api/v1/otlp/v1/metrics"} {
		for _, h := range [][]string{{"Sec-Fetch-Site", "cross-site"}, {"Origin", "http://evil.example"}, {"Sec-Fetch-Site", "same-site"}} {
			code, _, body := ts.do(http.MethodPost, path, line, h...)
			if code != http.StatusForbidden || !strings.Contains(body, "cross-site") {
				t.Errorf("POST %s with %v: %d %s, want 403", path, h, code, body)
			}
		}
	}
	if ms, err := ts.db.Measurements(context.Background()); err != nil || len(ms) != 0 {
		t.Fatalf("cross-site writes stored %v (%v)", ms, err)
	}
	host := strings.TrimPrefix(ts.srv.URL, "http://")
	for _, h := range [][]string{nil, {"Sec-Fetch-Site", "same-origin"}, {"Origin", "http://" + host}} {
		if code, _, body := ts.do(http.MethodPost, "/write?db=x", line, h...); code != http.StatusNoContent {
			t.Errorf("write with %v: %d %s, want 204", h, code, body)
		}
	}
	// Reads are safe methods: a cross-site GET is served (the token, when
	// set, guards them).
	if code, _, body := ts.do(http.MethodGet, "/api/v1/labels", nil, "Sec-Fetch-Site", "cross-site"); code != http.StatusOK {
		t.Errorf("cross-site GET: %d %s", code, body)
	}
	if ms, err := ts.db.Measurements(context.Background()); err != nil || len(ms) != 1 {
		t.Fatalf("measurements %v (%v), want the one written", ms, err)
	}
}

// TestCrossSiteAfterToken: with a token set, a request without it is 401
// whatever else it carries (the token is checked first), and a cross-site
// write that carries it is still 403.
func TestCrossSiteAfterToken(t *testing.T) {
	ts := newTestServer(t, &Options{Token: "s3cret"})
	line := []byte("csrf value=1 1\n")
	if code, _, body := ts.do(http.MethodPost, "/write", line, "Origin", "http://evil.example"); code != http.StatusUnauthorized {
		t.Errorf("cross-site write without the token: %d %s, want 401", code, body)
	}
	if code, _, body := ts.do(http.MethodPost, "/write?p=s3cret", line, "Sec-Fetch-Site", "cross-site"); code != http.StatusForbidden {
		t.Errorf("cross-site write with the token: %d %s, want 403", code, body)
	}
	if code, _, body := ts.do(http.MethodPost, "/write?p=s3cret", line); code != http.StatusNoContent {
		t.Errorf("write with the token: %d %s, want 204", code, body)
	}
	if code, _, body := ts.do(http.MethodPost, "/api/v1/status/buildinfo?p=s3cret", nil); code != http.StatusOK {
		t.Errorf("POST buildinfo: %d %s, want 200", code, body)
	}
}

// browserDo returns, for the browser of ctx, a check that fails the test
// on an error, a run of a JS expression, and a poll until one is true.
func browserDo(t *testing.T, ctx context.Context) (must func(error), run func(string), poll func(string)) {
	must = func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	run = func(expr string) { t.Helper(); must(chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](expr))) }
	poll = func(expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
			t.Fatalf("waiting for %s: %v", expr, err)
		}
	}
	return must, run, poll
}

// TestStatusLatestFloatForm: the status endpoint's latest values are
// written as the query API writes sample values (Prometheus' form).
func TestStatusLatestFloatForm(t *testing.T) {
	ts := newTestServer(t, nil)
	vals := map[string]float64{"a": 0.00001, "b": 1e22, "c": 123456789, "d": -2.5e-7}
	var pts []engine.Point
	for dev, v := range vals {
		pts = append(pts, engine.Point{Measurement: "m", Tags: []engine.Tag{{Key: "dev", Value: dev}},
			Fields: []engine.Field{{Key: "value", Value: engine.Float(v)}}, Time: 1_700_000_000_000_000_000})
	}
	if err := ts.db.Write(pts); err != nil {
		t.Fatal(err)
	}
	code, _, body := ts.do(http.MethodGet, "/api/v1/status/strata?match[]=m", nil)
	if code != http.StatusOK {
		t.Fatalf("status: %d %s", code, body)
	}
	var st struct {
		Data struct {
			Latest []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"latest"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Data.Latest) != len(vals) {
		t.Fatalf("%d latest values, want %d: %s", len(st.Data.Latest), len(vals), body)
	}
	for _, l := range st.Data.Latest {
		v := vals[l.Metric["dev"]]
		if got, want := l.Value[1], string(appendFloat(nil, v)); got != want {
			t.Errorf("latest of %s: %v, want %q as the query API writes it", l.Metric["dev"], got, want)
		}
	}
}

// openKnownPage serves writeKnown's data, opens the page in a headless
// browser and waits until it lists both measurements.
func openKnownPage(t *testing.T) (ctx context.Context, must func(error), run, poll func(string)) {
	exe := chromiumPath(t)
	ts := newTestServer(t, nil)
	writeKnown(t, ts.db, time.Now())
	ctx = newBrowser(t, exe, time.Minute)
	must, run, poll = browserDo(t, ctx)
	must(chromedp.Do(ctx, chromedp.Navigate(ts.srv.URL+"/")))
	poll(`document.body.dataset.ready === "true" && document.querySelectorAll("#measurements button").length === 2`)
	return ctx, must, run, poll
}
