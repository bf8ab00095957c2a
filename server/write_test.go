package server

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

func TestWriteV2StoresEveryLine(t *testing.T) {
	ts := newTestServer(t, nil)
	body := "cpu,host=a usage=1.5,n=3i 1000\ncpu,host=b usage=2 2000\n\n# comment\ncpu,host=a usage=2.5 3000\n"
	code, hdr, resp := ts.do("POST", "/api/v2/write?org=o&bucket=b", []byte(body))
	if code != http.StatusNoContent || resp != "" {
		t.Fatalf("status %d body %q", code, resp)
	}
	if hdr.Get("X-Influxdb-Version") == "" {
		t.Error("no X-Influxdb-Version")
	}
	got := ts.all("cpu")
	want := map[string][]engine.Sample{
		"cpu,host=a usage": {{Time: 1000, Value: f(1.5)}, {Time: 3000, Value: f(2.5)}},
		"cpu,host=a n":     {{Time: 1000, Value: engine.Int(3)}},
		"cpu,host=b usage": {{Time: 2000, Value: f(2)}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, w := range want {
		if !samplesEqual(got[k], w) {
			t.Errorf("%s: got %v, want %v", k, got[k], w)
		}
	}
}

func TestWritePrecision(t *testing.T) {
	ts := newTestServer(t, nil)
	cases := []struct {
		path string
		unit int64
	}{
		{"/api/v2/write?precision=ns", 1},
		{"/api/v2/write?precision=us", 1e3},
		{"/api/v2/write?precision=ms", 1e6},
		{"/api/v2/write?precision=s", 1e9},
		{"/write?db=x&precision=n", 1},
		{"/write?db=x&precision=u", 1e3},
		{"/write?db=x&precision=ms", 1e6},
		{"/write?db=x&precision=s", 1e9},
		{"/write?db=x&precision=m", 60e9},
		{"/write?db=x&precision=h", 3600e9},
	}
	for i, c := range cases {
		m := fmt.Sprintf("p%d", i)
		code, _, body := ts.do("POST", c.path, []byte(m+" v=1 7\n"))
		if code != http.StatusNoContent {
			t.Fatalf("%s: %d %s", c.path, code, body)
		}
		got := ts.all(m)[m+" v"]
		if len(got) != 1 || got[0].Time != 7*c.unit {
			t.Errorf("%s: got %v, want time %d", c.path, got, 7*c.unit)
		}
	}
	for _, p := range []string{"/api/v2/write?precision=h", "/api/v2/write?precision=n", "/write?precision=x"} {
		if code, _, _ := ts.do("POST", p, []byte("bad v=1 1\n")); code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", p, code)
		}
	}
	if n := ts.count("bad"); n != 0 {
		t.Errorf("%d samples stored for a bad precision", n)
	}
	// A minute timestamp that overflows in ns rejects its line alone.
	code, _, body := ts.do("POST", "/write?precision=h", []byte("ovf v=1 1\novf v=2 99999999999\n"))
	if code != http.StatusBadRequest || !strings.Contains(body, "line 2:") || ts.count("ovf") != 1 {
		t.Errorf("overflow: %d %s, %d stored", code, body, ts.count("ovf"))
	}
}

func TestWriteNoTimestampUsesNow(t *testing.T) {
	now := time.Unix(1_700_000_123, 456_789_123)
	ts := newTestServer(t, &Options{Now: func() time.Time { return now }})
	ts.do("POST", "/api/v2/write?precision=s", []byte("a v=1\n"))
	ts.do("POST", "/write?precision=m", []byte("b v=1\n"))
	if got := ts.all("a")["a v"]; len(got) != 1 || got[0].Time != 1_700_000_123e9 {
		t.Errorf("precision s: %v", got)
	}
	if got := ts.all("b")["b v"]; len(got) != 1 || got[0].Time != now.Truncate(time.Minute).UnixNano() {
		t.Errorf("precision m: %v, want %d", got, now.Truncate(time.Minute).UnixNano())
	}
}

func TestWriteGzip(t *testing.T) {
	ts := newTestServer(t, nil)
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "g,dev=d%d v=%d %d\n", i%10, i, i)
	}
	code, _, body := ts.do("POST", "/api/v2/write", gzipBytes(t, []byte(b.String())), "Content-Encoding", "gzip")
	if code != http.StatusNoContent {
		t.Fatalf("%d %s", code, body)
	}
	if n := ts.count("g"); n != 1000 {
		t.Errorf("%d samples, want 1000", n)
	}
	code, _, _ = ts.do("POST", "/api/v2/write", []byte("not gzip"), "Content-Encoding", "gzip")
	if code != http.StatusBadRequest {
		t.Errorf("bad gzip: %d", code)
	}
	code, _, _ = ts.do("POST", "/api/v2/write", []byte("g v=1"), "Content-Encoding", "br")
	if code != http.StatusUnsupportedMediaType {
		t.Errorf("unknown encoding: %d", code)
	}
}

func TestPartialWrite(t *testing.T) {
	ts := newTestServer(t, nil)
	body := "pw v=1 1\npw v= 2\npw v=3 3\npw v=\"s\" 4\npw,x=1 v=5 5\n"
	code, _, resp := ts.do("POST", "/api/v2/write", []byte(body))
	if code != http.StatusBadRequest {
		t.Fatalf("status %d", code)
	}
	m := decodeJSON(t, resp)
	msg, _ := m["message"].(string)
	if m["code"] != "invalid" || !containsAll(msg, "partial write", "line 2:", "line 4:") || strings.Contains(msg, "line 3:") {
		t.Errorf("v2 body %s", resp)
	}
	got := ts.all("pw")
	if !samplesEqual(got["pw v"], []engine.Sample{{Time: 1, Value: f(1)}, {Time: 3, Value: f(3)}}) ||
		!samplesEqual(got["pw,x=1 v"], []engine.Sample{{Time: 5, Value: f(5)}}) {
		t.Errorf("stored %v", got)
	}

	code, _, resp = ts.do("POST", "/write?db=x", []byte("pw1 v=1 1\npw1 v=oops 2\n"))
	m = decodeJSON(t, resp)
	if e, _ := m["error"].(string); code != http.StatusBadRequest || !strings.HasPrefix(e, "partial write: line 2:") {
		t.Errorf("v1: %d %s", code, resp)
	}
	if ts.count("pw1") != 1 {
		t.Errorf("v1 stored %d", ts.count("pw1"))
	}

	// Many bad lines: the first ten are named, the rest counted.
	var many strings.Builder
	for i := range 50 {
		fmt.Fprintf(&many, "pw2 v=%d %d\npw2 v=bad\n", i, i)
	}
	code, _, resp = ts.do("POST", "/api/v2/write", []byte(many.String()))
	msg, _ = decodeJSON(t, resp)["message"].(string)
	if code != http.StatusBadRequest || !containsAll(msg, "line 2:", "line 20:", "and 40 more", "dropped=50 written=50") ||
		strings.Contains(msg, "line 22:") || ts.count("pw2") != 50 {
		t.Errorf("many rejected: %d %s, %d stored", code, msg, ts.count("pw2"))
	}
}

func TestBodyLimit(t *testing.T) {
	ts := newTestServer(t, &Options{MaxBodyBytes: 1000})
	var b strings.Builder
	for i := 0; b.Len() <= 1000; i++ {
		fmt.Fprintf(&b, "big v=%d %d\n", i, i)
	}
	big := []byte(b.String())
	for _, c := range []struct {
		name string
		body []byte
		hdr  []string
	}{
		{"plain", big, nil},
		{"gzip", gzipBytes(t, big), []string{"Content-Encoding", "gzip"}},
		{"chunked", big, []string{"Transfer-Encoding", "chunked"}},
	} {
		for _, path := range []string{"/api/v2/write", "/write"} {
			code, _, body := ts.do("POST", path, c.body, c.hdr...)
			if code != http.StatusRequestEntityTooLarge {
				t.Errorf("%s %s: %d %s", c.name, path, code, body)
			}
		}
	}
	// A gzip body under the limit compressed but over it decompressed.
	bomb := gzipBytes(t, bytes.Repeat([]byte("bomb v=1 1\n"), 10000))
	if len(bomb) > 1000 {
		t.Fatalf("bomb is %d bytes", len(bomb))
	}
	if code, _, _ := ts.do("POST", "/api/v2/write", bomb, "Content-Encoding", "gzip"); code != http.StatusRequestEntityTooLarge {
		t.Errorf("gzip bomb: %d", code)
	}
	if n := ts.count("big") + ts.count("bomb"); n != 0 {
		t.Errorf("%d samples stored from bodies over the limit", n)
	}
	if code, _, _ := ts.do("POST", "/api/v2/write", []byte("small v=1 1\n")); code != http.StatusNoContent {
		t.Errorf("small body: %d", code)
	}
}

func TestStalledEngineIs503(t *testing.T) {
	stalled := true
	ts := newTestServer(t, &Options{
		Stalled:    func(engine.Stats) bool { return stalled },
		StallWait:  -1,
		RetryAfter: 1500 * time.Millisecond,
	})
	for _, path := range []string{"/api/v2/write", "/write"} {
		code, hdr, body := ts.do("POST", path, []byte("st v=1 1\n"))
		if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") != "2" {
			t.Errorf("%s: %d Retry-After %q %s", path, code, hdr.Get("Retry-After"), body)
		}
	}
	code, hdr, _ := ts.do("POST", "/api/v1/write", remoteBody(t, series("st", 1, 1)), remoteHeaders...)
	if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Errorf("remote write: %d", code)
	}
	if n := ts.count("st"); n != 0 {
		t.Errorf("%d samples stored while stalled", n)
	}
	stalled = false
	if code, _, _ := ts.do("POST", "/api/v2/write", []byte("st v=1 1\n")); code != http.StatusNoContent {
		t.Errorf("after the stall: %d", code)
	}
}

func TestStalledFunc(t *testing.T) {
	check := StalledFunc(&engine.Options{MaxImmutableMemTables: 3, L0StopWritesTrigger: 20})
	for _, c := range []struct {
		imm, l0 int
		want    bool
	}{{0, 0, false}, {2, 19, false}, {3, 0, true}, {0, 20, true}} {
		if got := check(engine.Stats{ImmutableMemTables: c.imm, SegmentsPerLevel: []int{c.l0, 0}}); got != c.want {
			t.Errorf("imm %d l0 %d: %v", c.imm, c.l0, got)
		}
	}
	if DefaultStalled(engine.Stats{ImmutableMemTables: engine.DefaultMaxImmutableMemTables}) != true {
		t.Error("default check misses a full immutable queue")
	}
}

func TestAuth(t *testing.T) {
	ts := newTestServer(t, &Options{Token: "s3cret"})
	basic := func(u, p string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p)) }
	line := []byte("au v=1 1\n")
	ok := []struct {
		path string
		hdr  []string
	}{
		{"/api/v2/write", []string{"Authorization", "Token s3cret"}},
		{"/api/v2/write", []string{"Authorization", "Bearer s3cret"}},
		{"/write?u=anyone&p=s3cret", nil},
		{"/write", []string{"Authorization", basic("me", "s3cret")}},
	}
	for i, c := range ok {
		if code, _, body := ts.do("POST", c.path, fmt.Appendf(nil, "au v=1 %d\n", i), c.hdr...); code != http.StatusNoContent {
			t.Errorf("%s %v: %d %s", c.path, c.hdr, code, body)
		}
	}
	bad := []struct {
		path string
		hdr  []string
	}{
		{"/api/v2/write", nil},
		{"/api/v2/write", []string{"Authorization", "Token wrong"}},
		{"/api/v2/write", []string{"Authorization", "Token s3cre"}},
		{"/api/v2/write", []string{"Authorization", "Token s3cret2"}},
		{"/write?p=nope", nil},
		{"/write", []string{"Authorization", basic("s3cret", "x")}},
		{"/write", []string{"Authorization", "Basic !!!"}},
		{"/api/v1/write", nil},
		{"/api/v1/query?query=1", nil},
		{"/api/v1/labels", nil},
		{"/metrics", nil},
	}
	for _, c := range bad {
		method := "POST"
		if strings.HasPrefix(c.path, "/metrics") || strings.Contains(c.path, "query") || strings.Contains(c.path, "labels") {
			method = "GET"
		}
		if code, _, _ := ts.do(method, c.path, line, c.hdr...); code != http.StatusUnauthorized {
			t.Errorf("%s %s %v: %d, want 401", method, c.path, c.hdr, code)
		}
	}
	if n := ts.count("au"); n != len(ok) {
		t.Errorf("%d samples stored, want %d", n, len(ok))
	}
	if code, hdr, _ := ts.do("GET", "/ping", nil); code != http.StatusNoContent || hdr.Get("X-Influxdb-Version") == "" {
		t.Errorf("/ping: %d", code)
	}
	if code, _, _ := ts.do("GET", "/health", nil); code != http.StatusOK {
		t.Errorf("/health: %d", code)
	}
	if code, _, _ := ts.do("GET", "/metrics", nil, "Authorization", "Token s3cret"); code != http.StatusOK {
		t.Errorf("/metrics with the token: %d", code)
	}
}

func TestPingHealthMethods(t *testing.T) {
	ts := newTestServer(t, nil)
	code, hdr, body := ts.do("GET", "/ping", nil)
	if code != http.StatusNoContent || hdr.Get("X-Influxdb-Version") == "" || body != "" {
		t.Errorf("/ping: %d %v %q", code, hdr, body)
	}
	if code, _, _ := ts.do("HEAD", "/ping", nil); code != http.StatusNoContent {
		t.Errorf("HEAD /ping: %d", code)
	}
	code, hdr, body = ts.do("GET", "/health", nil)
	if m := decodeJSON(t, body); code != http.StatusOK || m["status"] != "pass" ||
		!strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Errorf("/health: %d %s", code, body)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v2/write"}, {"GET", "/write"}, {"GET", "/api/v1/write"}, {"DELETE", "/api/v1/query"},
		{"POST", "/ping"},
	} {
		if code, _, _ := ts.do(c.method, c.path, nil); code != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d", c.method, c.path, code)
		}
	}
	if code, _, _ := ts.do("GET", "/nope", nil); code != http.StatusNotFound {
		t.Errorf("unknown path: %d", code)
	}
}

func TestWriteAfterCloseIs503(t *testing.T) {
	db, err := engine.Open(t.TempDir(), &engine.Options{Sync: engine.SyncNever})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	ts := &testServer{t: t, db: db, h: h}
	ts.srv = newLoopback(t, h)
	code, hdr, _ := ts.do("POST", "/api/v2/write", []byte("c v=1 1\n"))
	if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Errorf("closed db: %d", code)
	}
}

// endless is a body of n bytes of line protocol that counts what was read.
type endless struct {
	n, read int64
}

func (e *endless) Read(p []byte) (int, error) {
	if e.read >= e.n {
		return 0, io.EOF
	}
	k := int64(len(p))
	if rest := e.n - e.read; k > rest {
		k = rest
	}
	for i := range p[:k] {
		p[i] = "m v=1\n"[(e.read+int64(i))%6]
	}
	e.read += k
	return int(k), nil
}

// TestBodyReadBounded: a body far over the limit is read no further than
// the limit (plus a read buffer) before the 413, whatever its length claims.
func TestBodyReadBounded(t *testing.T) {
	const limit = 64 << 10
	ts := newTestServer(t, &Options{MaxBodyBytes: limit})
	for _, path := range []string{"/api/v2/write", "/write", "/api/v1/write"} {
		body := &endless{n: 100 * limit}
		req := httptest.NewRequest("POST", path, body)
		req.ContentLength = -1 // unknown, as with chunked encoding
		rec := httptest.NewRecorder()
		ts.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %d %s", path, rec.Code, rec.Body)
		}
		if body.read > 2*limit {
			t.Errorf("%s: read %d bytes of the body for a limit of %d", path, body.read, limit)
		}
	}
	if n := ts.count("m"); n != 0 {
		t.Errorf("%d stored", n)
	}
}
