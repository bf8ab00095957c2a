package server

import (
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql"

	"github.com/stratadb/strata/engine"
)

// Defaults for the zero fields of Options.
const (
	DefaultMaxBodyBytes  = 32 << 20
	DefaultRetryAfter    = time.Second
	DefaultStallWait     = time.Second
	DefaultQueryTimeout  = 2 * time.Minute
	DefaultMaxSamples    = 50_000_000
	DefaultLookbackDelta = 5 * time.Minute
)

// Version is the InfluxDB version that /ping reports in X-Influxdb-Version
// and the Prometheus version that /api/v1/status/buildinfo reports: the
// versions whose APIs the server speaks.
const (
	InfluxDBVersion   = "2.7.0-strata"
	PrometheusVersion = "3.16.0"
)

// Options configure the handler. A nil *Options and every zero field mean
// the default.
type Options struct {
	// Token, when set, is required by every endpoint but /ping, /health and
	// the operator page's own files (GET and HEAD of / and /ui/...):
	// as "Authorization: Token T" (or "Bearer T"), as the password of
	// "Authorization: Basic", or as the p query parameter. It is compared
	// in constant time.
	Token string
	// MaxBodyBytes is the largest request body accepted, counted after
	// decompression; a larger one is answered 413 and nothing of it is
	// stored. Default 32 MiB.
	MaxBodyBytes int64
	// Stalled reports whether the engine has stopped taking writes for now
	// (flushes or compactions far behind). A write that arrives while it
	// is true and stays true for StallWait is answered 503 with
	// Retry-After, nothing of it stored. The default reads db.Stats()
	// against the engine's default thresholds (DefaultStalled); a server
	// over a DB opened with other MaxImmutableMemTables or
	// L0StopWritesTrigger passes StalledFunc(those options).
	Stalled func(engine.Stats) bool
	// StallWait is how long a write waits for a stalled engine before 503.
	// Default 1s; negative means not at all.
	StallWait time.Duration
	// RetryAfter is the Retry-After of a 503, rounded up to seconds.
	// Default 1s.
	RetryAfter time.Duration
	// Now gives the time of lines without a timestamp; default time.Now.
	Now func() time.Time
	// Logger receives request failures; default slog.Default().
	Logger *slog.Logger
	// Registerer, when set, also registers the server's metrics there. They
	// are always served by /metrics.
	Registerer prometheus.Registerer
	// Collectors are served by /metrics beside the server's own metrics,
	// e.g. a forwarder's strata_forward_* metrics.
	Collectors []prometheus.Collector
	// QueryTimeout bounds a PromQL query; default 2m.
	QueryTimeout time.Duration
	// MaxSamples bounds the samples a PromQL query may hold; default 50M.
	MaxSamples int
	// LookbackDelta is PromQL's staleness window; default 5m.
	LookbackDelta time.Duration
	// ForwardStatus and MQTTStatus, when set, are called by the status
	// endpoint (StatusPath), which the page shows: a forwarder's lag and
	// backlog, an MQTT subscriber's connection.
	ForwardStatus func() ForwardStatus
	MQTTStatus    func() MQTTStatus
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Stalled == nil {
		c.Stalled = DefaultStalled
	}
	if c.StallWait == 0 {
		c.StallWait = DefaultStallWait
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.QueryTimeout <= 0 {
		c.QueryTimeout = DefaultQueryTimeout
	}
	if c.MaxSamples <= 0 {
		c.MaxSamples = DefaultMaxSamples
	}
	if c.LookbackDelta <= 0 {
		c.LookbackDelta = DefaultLookbackDelta
	}
	return c
}

// StalledFunc returns a stall check for a DB opened with opts: the engine
// blocks writers when MaxImmutableMemTables sealed memtables wait for flush
// or level 0 holds L0StopWritesTrigger segments.
func StalledFunc(opts *engine.Options) func(engine.Stats) bool {
	o := opts.Clone()
	o.EnsureDefaults()
	maxImm, l0Stop, l0Off := o.MaxImmutableMemTables, o.L0StopWritesTrigger, o.DisableBackgroundCompaction
	return func(s engine.Stats) bool {
		if s.ImmutableMemTables >= maxImm {
			return true
		}
		return !l0Off && len(s.SegmentsPerLevel) > 0 && s.SegmentsPerLevel[0] >= l0Stop
	}
}

// DefaultStalled is the stall check for a DB opened with default options.
var DefaultStalled = StalledFunc(nil)

// ErrInvalidOptions is returned by New for options that cannot work.
var ErrInvalidOptions = errors.New("server: invalid options")

// Server is the handler New returns.
type Server struct {
	db      *engine.DB
	opts    Options
	mux     *http.ServeMux
	metrics *metrics
	engine  *promql.Engine
	store   *Storage
	token   []byte
	started time.Time
	rate    rateMeter

	// public holds the paths served without the token (see register).
	public map[string]bool
	// unauthorized answers a request that lacks the token.
	unauthorized http.HandlerFunc
	// crossSite answers an unsafe request sent by a page of another site.
	crossSite          http.HandlerFunc
	labelValuesHandler http.HandlerFunc
	// remoteApps and otlpApps pool the engine appenders of remote and
	// OTLP writes.
	remoteApps, otlpApps sync.Pool
}

// New returns an http.Handler that serves db (see the package comment). The
// caller owns db and closes it after the handler's last request.
func New(db *engine.DB, opts *Options) (http.Handler, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil db", ErrInvalidOptions)
	}
	o := opts.withDefaults()
	s := &Server{db: db, opts: o, mux: http.NewServeMux(), token: []byte(o.Token), public: map[string]bool{}}
	var err error
	if s.metrics, err = newMetrics(db, o.Registerer, o.Collectors); err != nil {
		return nil, err
	}
	s.unauthorized = s.metrics.instrument("unauthorized", s.deny)
	s.crossSite = s.metrics.instrument("cross_site", denyCrossSite)
	s.store = NewStorage(db)
	s.engine = promql.NewEngine(promql.EngineOpts{
		Logger:               o.Logger,
		MaxSamples:           o.MaxSamples,
		Timeout:              o.QueryTimeout,
		LookbackDelta:        o.LookbackDelta,
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
	})

	s.handle("/ping", "ping", false, s.ping, http.MethodGet, http.MethodHead)
	s.handle("/health", "health", false, s.health, http.MethodGet, http.MethodHead)
	s.handle("/metrics", "metrics", true, s.metrics.handler.ServeHTTP, http.MethodGet, http.MethodHead)
	s.handle("/api/v2/write", "influx_write_v2", true, s.writeV2, http.MethodPost)
	s.handle("/write", "influx_write_v1", true, s.writeV1, http.MethodPost)
	s.handle("/api/v1/write", "prom_remote_write", true, s.remoteWrite, http.MethodPost)
	s.handle("/api/v1/otlp/v1/metrics", "otlp_write", true, s.otlpWrite, http.MethodPost)
	s.handle("/api/v1/read", "prom_remote_read", true, newRemoteReadHandler(s), http.MethodPost)
	s.handle("/api/v1/query", "prom_query", true, s.query, http.MethodGet, http.MethodPost)
	s.handle("/api/v1/query_range", "prom_query_range", true, s.queryRange, http.MethodGet, http.MethodPost)
	s.handle("/api/v1/series", "prom_series", true, s.series, http.MethodGet, http.MethodPost)
	s.handle("/api/v1/labels", "prom_labels", true, s.labels, http.MethodGet, http.MethodPost)
	s.labelValuesHandler = s.wrap("prom_label_values", s.labelValues, http.MethodGet, http.MethodPost)
	s.handle("/api/v1/status/buildinfo", "prom_buildinfo", true, s.buildInfo, http.MethodGet, http.MethodPost)
	s.handle("/api/v1/admin/snapshot", "admin_snapshot", true, s.snapshot, http.MethodPost, http.MethodPut)
	s.registerPage()
	return s, nil
}

// crossOrigin refuses the unsafe requests that browsers mark as sent by
// another origin.
var crossOrigin = http.NewCrossOriginProtection()

// labelValuesPrefix starts the path /api/v1/label/<name>/values.
const labelValuesPrefix = "/api/v1/label/"

// ServeHTTP serves one request. With a token set, the token is checked
// before anything else looks at the request: an unauthenticated request to
// any path but a public one (see handle) is 401 whatever its method, and
// whether or not the path exists. The operator page's own files (no data)
// are public too: exactly GET and HEAD of the paths isPagePath lists.
//
// Then a request that a browser marks as sent by a page of another site
// (Sec-Fetch-Site, or an Origin not this host) is 403 unless its method is
// GET, HEAD or OPTIONS: without a token, a form or a no-cors fetch on any
// website could otherwise write into the database or take snapshots (each
// keeps the database's files on disk) through the operator's browser.
// Clients that are no browser (Telegraf, Prometheus, Grafana's server, curl)
// send neither header and pass.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(s.token) > 0 && !s.public[r.URL.Path] && !isPagePath(r.Method, r.URL.Path) && !s.authorized(r) {
		s.unauthorized(w, r)
		return
	}
	if crossOrigin.Check(r) != nil {
		s.crossSite(w, r)
		return
	}
	// A label name may hold what ServeMux would clean away ("", "..").
	if strings.HasPrefix(r.URL.Path, labelValuesPrefix) && strings.HasSuffix(r.URL.Path, "/values") {
		s.labelValuesHandler(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// handle registers h for path (see wrap). A path registered with auth
// false is public: served without the token, whatever the method (the
// method check then answers 405 as for anyone). Only the exact path is
// public, never a path under it. The operator page's static files (GET /
// and its assets) are to be registered here with auth false, so that the
// page loads without the token; its data requests carry it.
func (s *Server) handle(path, name string, auth bool, h http.HandlerFunc, methods ...string) {
	if !auth {
		s.public[path] = true
	}
	s.mux.HandleFunc(path, s.wrap(name, h, methods...))
}

// wrap returns h behind a check of the method, counting the request and
// its latency under name. The token was checked before (ServeHTTP).
func (s *Server) wrap(name string, h http.HandlerFunc, methods ...string) http.HandlerFunc {
	allow := strings.Join(methods, ", ")
	return s.metrics.instrument(name, func(w http.ResponseWriter, r *http.Request) {
		if !containsMethod(methods, r.Method) {
			w.Header().Set("Allow", allow)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h(w, r)
	})
}

// deny answers 401 with a body that InfluxDB's clients (code, message) and
// Prometheus' (error) both read.
func (s *Server) deny(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Token realm="strata"`)
	writeJSON(w, http.StatusUnauthorized, map[string]string{
		"code": "unauthorized", "message": "unauthorized access", "error": "unauthorized access",
	})
}

// denyCrossSite answers 403, in a body that InfluxDB's and Prometheus'
// clients both read.
func denyCrossSite(w http.ResponseWriter, r *http.Request) {
	const msg = "cross-site request refused: a browser sent it from a page of another site"
	writeJSON(w, http.StatusForbidden, map[string]string{
		"code": "forbidden", "message": msg, "status": "error", "errorType": "forbidden", "error": msg,
	})
}

func containsMethod(methods []string, m string) bool {
	for _, x := range methods {
		if x == m {
			return true
		}
	}
	return false
}

// authorized reports whether r carries the token, or no token is set.
func (s *Server) authorized(r *http.Request) bool {
	if len(s.token) == 0 {
		return true
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		cred = strings.TrimSpace(cred)
		switch strings.ToLower(scheme) {
		case "token", "bearer":
			return s.tokenEqual(cred)
		case "basic":
			raw, err := base64.StdEncoding.DecodeString(cred)
			if err != nil {
				return false
			}
			_, pass, ok := strings.Cut(string(raw), ":")
			return ok && s.tokenEqual(pass)
		}
		return false
	}
	if p := r.URL.Query().Get("p"); p != "" {
		return s.tokenEqual(p)
	}
	return false
}

func (s *Server) tokenEqual(got string) bool {
	return subtle.ConstantTimeCompare([]byte(got), s.token) == 1
}

func (s *Server) ping(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Influxdb-Version", InfluxDBVersion)
	w.Header().Set("X-Influxdb-Build", "OSS")
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{
		"name":    "strata",
		"message": "ready for queries and writes",
		"status":  "pass",
		"version": InfluxDBVersion,
	})
}
