package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/stratadb/strata/engine"
)

// The page's budgets, measured in the test browser.
const (
	maxDrawMillis = 100   // setData of a 10,000-point chart
	benchPoints   = 10000 // points of that chart
)

// chromiumPath finds the browser the page test drives: the OS package
// (scripts/test installs it). Missing, the test fails: the page is then
// untested, which must not pass silently.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("STRATA_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium: install the chromium package (scripts/test does) or set STRATA_CHROMIUM")
	return ""
}

// browserLog collects what the page must not produce (console errors,
// uncaught exceptions, failed loads) and what it transfers.
type browserLog struct {
	mu       sync.Mutex
	errors   []string
	urls     map[network.RequestID]string
	requests []*network.Request
	bytes    map[string]float64 // encoded bytes by URL path
}

func (l *browserLog) listen(ev any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			l.errors = append(l.errors, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		l.errors = append(l.errors, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
	case *cdplog.EventEntryAdded:
		if e := ev.Entry; e.Level == cdplog.EntryLevelError || e.Level == cdplog.EntryLevelWarning {
			l.errors = append(l.errors, fmt.Sprintf("log %s %s: %s %s", e.Level, e.Source, e.Text, e.URL))
		}
	case *network.EventRequestWillBeSent:
		l.urls[ev.RequestID] = ev.Request.URL
		l.requests = append(l.requests, ev.Request)
	case *network.EventLoadingFinished:
		if u, ok := l.urls[ev.RequestID]; ok {
			if i := strings.Index(u[len("http://"):], "/"); i >= 0 {
				u = u[len("http://")+i:]
			}
			u, _, _ = strings.Cut(u, "?")
			l.bytes[u] += ev.EncodedDataLength
		}
	case *network.EventLoadingFailed:
		l.errors = append(l.errors, fmt.Sprintf("loading %s failed: %s", l.urls[ev.RequestID], ev.ErrorText))
	}
}

func (l *browserLog) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errors {
		t.Errorf("browser: %s", e)
	}
}

// plotted is what the page's chart holds: uPlot's data and series labels.
type plotted struct {
	X      []float64
	Ys     [][]*float64
	Labels []string
}

// pageKey is the key the page shows for a series: name{k="v",...}.
func pageKey(ls labels.Labels) string {
	var b strings.Builder
	b.WriteString(ls.Get(labels.MetricName))
	b.WriteByte('{')
	first := true
	ls.Range(func(l labels.Label) {
		if l.Name == labels.MetricName {
			return
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(l.Name + "=" + strconv.Quote(l.Value))
	})
	b.WriteByte('}')
	return b.String()
}

// knownSeries returns the samples of measurement m as the query API sees
// them (ms, float64), by page key.
func knownSeries(t *testing.T, db *engine.DB, m string) map[string]fsamples {
	t.Helper()
	res, err := db.Query(context.Background(), engine.Query{Selector: engine.Selector{Measurement: m}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]fsamples{}
	b := labels.NewScratchBuilder(4)
	for _, s := range res {
		out[pageKey(promLabels(&b, s.Measurement, s.Field, s.Tags))] = toMillis(s.Samples)
	}
	return out
}

// expectAt is the value PromQL gives a plain selector at ms: the newest
// sample in (ms - lookback, ms].
func expectAt(s fsamples, ms int64) (float64, bool) {
	i, _ := slices.BinarySearchFunc(s, ms+1, func(x fsample, t int64) int { return int(x.t - t) })
	if i == 0 || s[i-1].t <= ms-DefaultLookbackDelta.Milliseconds() {
		return 0, false
	}
	return s[i-1].f, true
}

// checkPlot compares every point of the chart with the data.
func checkPlot(t *testing.T, p plotted, want map[string]fsamples, keys []string, from, to float64) {
	t.Helper()
	if !slices.Equal(p.Labels, keys) {
		t.Fatalf("chart series %q, want %q", p.Labels, keys)
	}
	if len(p.X) < 100 || p.X[0] > from+60 || p.X[len(p.X)-1] < to-60 {
		t.Fatalf("chart x: %d points from %v to %v, want about [%v, %v]", len(p.X), p.X[0], p.X[len(p.X)-1], from, to)
	}
	for i, k := range keys {
		drawn := 0
		for j, x := range p.X {
			ms := int64(math.Round(x * 1000))
			v, ok := expectAt(want[k], ms)
			got := p.Ys[i][j]
			switch {
			case ok && got == nil:
				t.Fatalf("%s at %d: no point drawn, want %v", k, ms, v)
			case !ok && got != nil:
				t.Fatalf("%s at %d: %v drawn, want none", k, ms, *got)
			case ok && *got != v:
				t.Fatalf("%s at %d: %v drawn, want %v", k, ms, *got, v)
			}
			if got != nil {
				drawn++
			}
		}
		if drawn < len(p.X)/2 {
			t.Fatalf("%s: %d of %d points drawn", k, drawn, len(p.X))
		}
	}
}

// TestPageBrowser drives the page in headless Chromium against a server
// holding known data.
func TestPageBrowser(t *testing.T) {
	exe := chromiumPath(t)
	const token = "tok-3141"
	ts := newTestServer(t, &Options{
		Token: token,
		ForwardStatus: func() ForwardStatus {
			return ForwardStatus{Protocol: "prometheus", Lag: 2 * time.Second, BacklogSamples: 120}
		},
	})
	now := time.Now()
	writeKnown(t, ts.db, now)
	if err := ts.db.Flush(); err != nil {
		t.Fatal(err)
	}

	ctx := newBrowser(t, exe, 3*time.Minute)
	bl := watchBrowser(t, ctx)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	eval := func(expr string) json.RawMessage {
		t.Helper()
		b, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr))
		must(err)
		return b
	}
	poll := func(expr string) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second)))
		if err != nil {
			t.Fatalf("waiting for %s: %v", expr, err)
		}
	}
	// tabTo presses Tab until the focused element satisfies cond, as a
	// keyboard user would, and fails after max presses.
	tabTo := func(cond string, max int) {
		t.Helper()
		for range max {
			var ok bool
			must(json.Unmarshal(eval(`(() => { const e = document.activeElement; return !!(e && (`+cond+`)); })()`), &ok))
			if ok {
				return
			}
			must(chromedp.Do(ctx, chromedp.KeyEvent(kb.Tab)))
		}
		t.Fatalf("%d tabs did not reach %s", max, cond)
	}

	// The page loads without the token and asks for it.
	must(chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(ts.srv.URL+"/")))
	poll(`!document.getElementById("login").hidden && document.activeElement.id === "token"`)
	must(chromedp.Do(ctx, chromedp.KeyEvent(token), chromedp.KeyEvent(kb.Enter)))
	poll(`document.body.dataset.ready === "true"`)

	// The live figures, and the forwarder's.
	poll(`document.querySelector('[data-stat="series"] dd') !== null`)
	var series string
	must(json.Unmarshal(eval(`document.querySelector('[data-stat="series"] dd').textContent`), &series))
	if series != "7" {
		t.Errorf("series figure %q, want 7", series)
	}
	var backlog string
	must(json.Unmarshal(eval(`document.querySelector('[data-stat="fwd-backlog"] dd').textContent`), &backlog))
	if backlog != "120" {
		t.Errorf("forward backlog figure %q", backlog)
	}

	// The measurements, as the database has them.
	var meas []string
	must(json.Unmarshal(eval(`[...document.querySelectorAll("#measurements button")].map(b => b.dataset.measurement)`), &meas))
	if want, _ := ts.db.Measurements(ctx); !slices.Equal(meas, want) {
		t.Fatalf("measurements %q, want %q", meas, want)
	}

	// With the keyboard: tab to the measurement, Enter; tab to a series,
	// Enter.
	tabTo(`e.dataset.measurement === "climate"`, 30)
	must(chromedp.Do(ctx, chromedp.KeyEvent(kb.Enter)))
	poll(`document.querySelectorAll("#series button").length === 4`)
	want := knownSeries(t, ts.db, "climate")
	k1 := `climate_temperature_celsius{host="gw1",room="kitchen"}`
	k2 := `climate_humidity{host="gw1",room="cellar"}`
	if want[k1] == nil || want[k2] == nil {
		t.Fatalf("known series %v", want)
	}
	tabTo(`e.dataset.key === `+strconv.Quote(k1), 40)
	must(chromedp.Do(ctx, chromedp.KeyEvent(kb.Enter)))
	poll(`window.strata.plot !== null && window.strata.plot.series.length === 2 && window.strata.plot.data[0].length > 0`)
	readPlot := func() plotted {
		var p plotted
		must(json.Unmarshal(eval(`(() => { const p = window.strata.plot;
			return {x: Array.from(p.data[0]), ys: p.data.slice(1).map(a => Array.from(a)), labels: p.series.slice(1).map(s => s.label)}; })()`), &p))
		return p
	}
	end := float64(time.Now().Unix())
	checkPlot(t, readPlot(), want, []string{k1}, end-3600, end-5)

	// A second series, by Enter as well.
	tabTo(`e.dataset.key === `+strconv.Quote(k2), 40)
	must(chromedp.Do(ctx, chromedp.KeyEvent(kb.Enter)))
	poll(`window.strata.plot.series.length === 3 && window.strata.plot.data[0].length > 0`)
	checkPlot(t, readPlot(), want, []string{k1, k2}, end-3600, end-5)

	// The latest values are Last's.
	poll(`[...document.querySelectorAll("#series button")].every(b => b.dataset.value !== undefined)`)
	var shown []struct{ Key, Value, Time string }
	must(json.Unmarshal(eval(`[...document.querySelectorAll("#series button")].map(b => ({key: b.dataset.key, value: b.dataset.value, time: b.dataset.time}))`), &shown))
	last, err := ts.db.Last(ctx, engine.Selector{Measurement: "climate"})
	must(err)
	if len(shown) != len(last) {
		t.Fatalf("latest values of %d series, Last has %d", len(shown), len(last))
	}
	b := labels.NewScratchBuilder(4)
	lastBy := map[string]fsample{}
	for _, s := range last {
		lastBy[pageKey(promLabels(&b, s.Measurement, s.Field, s.Tags))] = toMillis(s.Samples)[0]
	}
	for _, s := range shown {
		w, ok := lastBy[s.Key]
		sec, _ := strconv.ParseFloat(s.Time, 64)
		if !ok || s.Value != strconv.FormatFloat(w.f, 'g', -1, 64) || int64(math.Round(sec*1000)) != w.t {
			t.Errorf("latest of %s: %s at %s, Last has %v at %d", s.Key, s.Value, s.Time, w.f, w.t)
		}
	}

	// The tag filter and the text filter narrow the list.
	must(chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('#tagfilters select[data-tag="room"]');
		s.value = "kitchen"; s.dispatchEvent(new Event("change")); })()`)))
	var listed []string
	must(json.Unmarshal(eval(`[...document.querySelectorAll("#series button")].map(b => b.dataset.key)`), &listed))
	if len(listed) != 2 || !strings.Contains(listed[0], `room="kitchen"`) || !strings.Contains(listed[1], `room="kitchen"`) {
		t.Errorf("room=kitchen lists %q", listed)
	}
	must(chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("filter"), "humid")))
	must(json.Unmarshal(eval(`[...document.querySelectorAll("#series button")].map(b => b.dataset.key)`), &listed))
	if len(listed) != 1 || listed[0] != `climate_humidity{host="gw1",room="kitchen"}` {
		t.Errorf("room=kitchen and \"humid\" list %q", listed)
	}
	must(chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('#tagfilters select[data-tag="room"]');
		s.value = "\u0000"; s.dispatchEvent(new Event("change")); const f = document.getElementById("filter");
		f.value = ""; f.dispatchEvent(new Event("input")); })()`)))
	poll(`document.querySelectorAll("#series button").length === 4`)

	// The figures refresh by themselves: new points show up.
	before := ts.db.Stats().PointsWritten
	if err := ts.db.Write([]engine.Point{{Measurement: "power", Tags: []engine.Tag{{Key: "phase", Value: "L1"}},
		Fields: []engine.Field{{Key: "watts", Value: engine.Float(1)}}, Time: now.UnixNano()}}); err != nil {
		t.Fatal(err)
	}
	poll(fmt.Sprintf(`document.querySelector('[data-stat="points"] dd').textContent === %q`, strconv.FormatInt(before+1, 10)+" pts"))

	// Zoom: select a stretch of the chart; the page asks for it alone.
	var zoom struct{ From, To float64 }
	must(json.Unmarshal(eval(`(() => { const u = window.strata.plot, w = u.bbox.width / devicePixelRatio;
		u.setSelect({left: w * 0.5, width: w * 0.2, top: 0, height: 0});
		return window.strata.zoom; })()`), &zoom))
	if zoom.To-zoom.From < 300 || zoom.To-zoom.From > 1200 {
		t.Fatalf("zoomed to %+v", zoom)
	}
	poll(fmt.Sprintf(`window.strata.plot.data[0][0] >= %f - 60 && window.strata.plot.data[0][0] <= %f`, zoom.From, zoom.From))
	zp := readPlot()
	checkPlot(t, zp, want, []string{k1, k2}, zoom.From, zoom.To)
	if step := zp.X[1] - zp.X[0]; step > 2 {
		t.Errorf("zoomed step %vs, want finer than the hour's", step)
	}

	// The first load: every file of the page came gzip-compressed, under
	// the budget; no request put the token in its URL, every data request
	// carried it in its header.
	bl.mu.Lock()
	first := 0.0
	for _, p := range pageFiles {
		if bl.bytes[p] == 0 {
			t.Errorf("no transfer seen for %s", p)
		}
		first += bl.bytes[p]
	}
	for _, r := range bl.requests {
		if strings.Contains(r.URL, token) {
			t.Errorf("token in URL %s", r.URL)
		}
		if strings.Contains(r.URL, "/api/") && r.Headers["Authorization"] != "Token "+token {
			t.Errorf("%s without the token header: %v", r.URL, r.Headers)
		}
	}
	bl.mu.Unlock()
	t.Logf("first load of the page's files: %.0f bytes transferred", first)
	if first > maxFirstLoad {
		t.Errorf("first load %.0f bytes, budget %d", first, maxFirstLoad)
	}

	shoot := os.Getenv("STRATA_UPDATE_SCREENSHOTS") == "1"
	if shoot {
		must(chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById("unzoom").click()`)))
		poll(`window.strata.zoom === null && window.strata.plot.data[0][0] < Date.now() / 1000 - 3000`)
		must(chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.activeElement.blur(); window.scrollTo(0, 0)`)))
		saveScreenshot(t, ctx, "page-desktop.png")
	}

	// A 10,000-point chart, drawn by the page's own path, timed around
	// setData in the page: the best of five after three warm-ups (the
	// first builds the plot; the machine is shared).
	var ms []float64
	for range 8 {
		var d float64
		must(json.Unmarshal(eval(fmt.Sprintf(`window.strata.benchDraw(%d)`, benchPoints)), &d))
		ms = append(ms, d)
	}
	var n int
	must(json.Unmarshal(eval(`window.strata.plot.data[1].filter(v => v !== null).length`), &n))
	if n != benchPoints {
		t.Fatalf("bench chart holds %d points, want %d", n, benchPoints)
	}
	best := slices.Min(ms[3:])
	t.Logf("setData of %d points: %.1f ms (runs %v)", benchPoints, best, ms)
	if best >= maxDrawMillis {
		t.Errorf("setData of %d points took %.1f ms, budget %d", benchPoints, best, maxDrawMillis)
	}

	// A phone: 360 px wide, nothing wider than the screen; and another
	// time zone, which the chart follows.
	if _, err := chromedp.Call(ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Europe/Berlin"}); err != nil {
		t.Fatal(err)
	}
	must(chromedp.Do(ctx, chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile), chromedp.Reload()))
	poll(`document.body.dataset.ready === "true"`) // the token is kept for the tab
	must(chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('#measurements button[data-measurement="climate"]').click()`)))
	poll(`document.querySelectorAll("#series button").length === 4`)
	must(chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll("#series button")].find(b => b.dataset.key === `+strconv.Quote(k1)+`).click()`)))
	poll(`window.strata.plot !== null && window.strata.plot.data[0].length > 0 && [...document.querySelectorAll("#series button")].every(b => b.dataset.value !== undefined)`)
	var note, legend string
	must(json.Unmarshal(eval(`document.getElementById("chart-note").textContent`), &note))
	must(json.Unmarshal(eval(`window.strata.plot.series[0].label`), &legend))
	if !strings.Contains(note, "Europe/Berlin") || !strings.Contains(legend, "Europe/Berlin") {
		t.Errorf("time zone: note %q, legend %q", note, legend)
	}
	var width struct{ Scroll, Client int }
	must(json.Unmarshal(eval(`({scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth})`), &width))
	if width.Scroll > 360 || width.Client != 360 {
		t.Errorf("at 360 px: scrollWidth %d, clientWidth %d", width.Scroll, width.Client)
	}
	if shoot {
		must(chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.activeElement.blur(); document.getElementById("chart-section").scrollIntoView()`)))
		saveScreenshot(t, ctx, "page-phone.png")
	}

	bl.check(t)

	// A token the server refuses brings the form back, with a word why.
	must(chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem("strata.token", "wrong")`), chromedp.Reload()))
	poll(`!document.getElementById("login").hidden && document.getElementById("main").hidden && document.getElementById("login-error").textContent !== ""`)
	if code, _, _ := ts.do(http.MethodGet, "/api/v1/labels", nil); code != http.StatusUnauthorized {
		t.Errorf("labels without token: %d", code)
	}
}

// saveScreenshot writes the viewport to docs/img/name.
func saveScreenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join("..", "docs", "img", name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", p, len(buf))
}

// newBrowser starts headless Chromium (exe) for one test, on loopback
// only, and returns its context, which ends after timeout or with the test.
func newBrowser(t *testing.T, exe string, timeout time.Duration) context.Context {
	t.Helper()
	alloc, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	)
	t.Cleanup(cancel)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(cancelCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancelTimeout)
	return ctx
}

// watchBrowser records the requests and console messages of the browser
// of ctx (see browserLog).
func watchBrowser(t *testing.T, ctx context.Context) *browserLog {
	t.Helper()
	bl := &browserLog{urls: map[network.RequestID]string{}, bytes: map[string]float64{}}
	if err := chromedp.Listen(ctx, bl.listen); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	return bl
}
