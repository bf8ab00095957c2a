package server

import (
	"net/http"
	"strings"
	"testing"
)

// TestAuthBeforeRouting: with a token set, a request without it is 401
// whatever its method and path, known or not, before the method is looked
// at; only the public paths answer without it.
func TestAuthBeforeRouting(t *testing.T) {
	ts := newTestServer(t, &Options{Token: "s3cret"})
	methods := []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}
	paths := []string{
		"/api/v2/write", "/write", "/api/v1/write", "/api/v1/query", "/api/v1/query_range",
		"/api/v1/series", "/api/v1/labels", "/api/v1/label/job/values", "/api/v1/label//values",
		"/api/v1/status/buildinfo", "/metrics", "/nope", "/api/v1/admin/tsdb/snapshot",
		"/ui/nope.js", "/ui/", "/index.html", "/api/v1/status/strata",
		"/ping/", "/health/x", "/ping/../metrics", "//metrics", "/api/v1/write?p=wrong",
	}
	for _, m := range methods {
		for _, p := range paths {
			code, hdr, _ := ts.do(m, p, []byte("x v=1 1\n"))
			if code != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s without the token: %d, want 401", m, p, code)
			}
		}
	}
	// The public paths answer anyone; a wrong method there is 405. The
	// page's files are public for GET and HEAD only.
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/ping", 204}, {"HEAD", "/ping", 204}, {"GET", "/health", 200}, {"HEAD", "/health", 200},
		{"POST", "/ping", 405}, {"DELETE", "/health", 405},
		{"GET", "/", 200}, {"HEAD", "/", 200}, {"POST", "/", 401}, {"PUT", "/", 401}, {"DELETE", "/", 401},
	} {
		if code, _, _ := ts.do(c.method, c.path, nil); code != c.want {
			t.Errorf("%s %s without the token: %d, want %d", c.method, c.path, code, c.want)
		}
	}
	// With the token, routing and the method check happen as without one.
	tok := []string{"Authorization", "Token s3cret"}
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/api/v2/write", 405}, {"HEAD", "/api/v1/query", 405}, {"POST", "/metrics", 405},
		{"GET", "/nope", 404}, {"GET", "/metrics", 200}, {"GET", "/api/v1/status/buildinfo", 200},
	} {
		if code, _, _ := ts.do(c.method, c.path, nil, tok...); code != c.want {
			t.Errorf("%s %s with the token: %d, want %d", c.method, c.path, code, c.want)
		}
	}
	if n := ts.count("x"); n != 0 {
		t.Errorf("%d samples stored without the token", n)
	}
	_, _, metrics := ts.do("GET", "/metrics", nil, tok...)
	if !strings.Contains(metrics, `strata_http_requests_total{code="401",handler="unauthorized"}`) {
		t.Errorf("401s not counted:\n%s", grepLines(metrics, "strata_http_requests_total"))
	}
}
