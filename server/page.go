package server

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
)

// The operator's page: GET / answers ui/index.html, GET /ui/<file> the
// other files under ui/ (script, style, the vendored chart library). They
// hold no data and are served without the token; everything they show
// comes from the query API and the status endpoint, with the token.
//
//go:embed ui
var uiFiles embed.FS

// pageAsset is one file of the page, compressed once.
type pageAsset struct {
	ctype string
	etag  string // of raw
	raw   []byte
	gz    []byte // nil when gzip does not make it smaller
	// gzEtag is gz's entity tag: another body, so another tag, lest a
	// cache answer a client without gzip with a 304 for the gzip body.
	gzEtag string
}

var (
	pageOnce   sync.Once
	pageAssets map[string]*pageAsset // by URL path
	// pageIndexToken is "/" for a server with a token: the page then asks
	// for it before its first data request instead of meeting a 401.
	pageIndexToken *pageAsset
)

// pageAuthMark is the attribute of ui/index.html that tells the page
// whether the server wants a token.
const pageAuthMark = `data-auth=""`

// pageIndex is the file served for "/".
const pageIndex = "ui/index.html"

// loadPage reads and compresses the embedded files (once per process).
func loadPage() map[string]*pageAsset {
	pageOnce.Do(func() {
		pageAssets = map[string]*pageAsset{}
		fs.WalkDir(uiFiles, "ui", func(name string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(name, ".md") {
				return err
			}
			raw, err := uiFiles.ReadFile(name)
			if err != nil {
				return err
			}
			urlPath := "/" + name
			if name == pageIndex {
				urlPath = "/"
				pageIndexToken = newPageAsset(name, bytes.Replace(raw, []byte(pageAuthMark), []byte(`data-auth="token"`), 1))
			}
			pageAssets[urlPath] = newPageAsset(name, raw)
			return nil
		})
	})
	return pageAssets
}

func newPageAsset(name string, raw []byte) *pageAsset {
	sum := sha256.Sum256(raw)
	a := &pageAsset{raw: raw, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	switch ext := path.Ext(name); ext {
	case ".js":
		a.ctype = "text/javascript; charset=utf-8"
	case ".css":
		a.ctype = "text/css; charset=utf-8"
	case ".html":
		a.ctype = "text/html; charset=utf-8"
	case ".LICENSE", ".txt", "":
		a.ctype = "text/plain; charset=utf-8"
	default:
		if a.ctype = mime.TypeByExtension(ext); a.ctype == "" {
			a.ctype = "application/octet-stream"
		}
	}
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zw.Write(raw)
	zw.Close()
	if b.Len() < len(raw) {
		a.gz = b.Bytes()
		a.gzEtag = a.etag[:len(a.etag)-1] + `-gzip"`
	}
	return a
}

// isPagePath reports whether a request with this method and path is for
// one of the page's own files: exactly GET or HEAD of "/" or of a file the
// binary embeds under /ui/. These, and nothing else of the page, are
// served without the token.
func isPagePath(method, urlPath string) bool {
	if method != http.MethodGet && method != http.MethodHead {
		return false
	}
	_, ok := loadPage()[urlPath]
	return ok
}

// pageCSP keeps the page to its own files: no inline script, no other
// origin, no framing.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"

// page serves the page's files; any other path the mux routes here is 404.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	a, ok := loadPage()[r.URL.Path]
	if ok && r.URL.Path == "/" && len(s.token) > 0 {
		a = pageIndexToken
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, etag := a.raw, a.etag
	gz := a.gz != nil && acceptsGzip(r.Header.Get("Accept-Encoding"))
	if gz {
		body, etag = a.gz, a.gzEtag
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("ETag", etag)
	h.Set("Cache-Control", "no-cache") // revalidate: a new binary may bring new files
	h.Set("Vary", "Accept-Encoding")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Frame-Options", "DENY") // frame-ancestors for browsers without it
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if gz {
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// etagMatch reports whether an If-None-Match header lists etag (or *).
func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		t = strings.TrimPrefix(t, "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.TrimSpace(name) != "*" {
			continue
		}
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		return q > 0
	}
	return false
}
