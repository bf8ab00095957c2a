package server

import (
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/stratadb/strata/engine"
)

// StatusPath is the JSON status endpoint the page reads: the database's
// live figures, the forwarder's and the MQTT subscriber's when their hooks
// are set, the measurements, and the newest sample of the series that its
// match[] selectors pick.
const StatusPath = "/api/v1/status/strata"

// ForwardStatus is what the status endpoint shows of a forwarder
// (Options.ForwardStatus).
type ForwardStatus struct {
	Protocol       string        // e.g. "prometheus"; never the URL (it may hold credentials)
	Lag            time.Duration // age of the oldest undelivered sample
	BacklogSamples int64
	BacklogBytes   int64
	SamplesSent    int64
	SamplesDropped int64
	Retries        int64
	LastSuccess    time.Time // zero: never
	LastError      string
}

// MQTTStatus is what the status endpoint shows of an MQTT subscriber
// (Options.MQTTStatus).
type MQTTStatus struct {
	Connected   bool
	Broker      string // host:port, without credentials
	Topics      []string
	Messages    int64 // messages received
	Points      int64 // points stored from them
	Errors      int64 // messages that could not be stored
	LastMessage time.Time
	LastError   string
}

// maxLatest bounds the series whose newest sample one status request
// returns.
const maxLatest = 1000

type statusJSON struct {
	Time         time.Time    `json:"time"`
	Started      time.Time    `json:"started"`
	Measurements []string     `json:"measurements"`
	DB           dbStatusJSON `json:"db"`
	Forward      *forwardJSON `json:"forward,omitempty"`
	MQTT         *mqttJSON    `json:"mqtt,omitempty"`
	Latest       []latestJSON `json:"latest"`
	Truncated    bool         `json:"latestTruncated,omitempty"`
	Levels       []levelJSON  `json:"levels"`
}

type dbStatusJSON struct {
	Series                 int     `json:"series"`
	PointsWritten          int64   `json:"pointsWritten"`
	SamplesWritten         int64   `json:"samplesWritten"`
	PointsPerSecond        float64 `json:"pointsPerSecond"`
	SamplesPerSecond       float64 `json:"samplesPerSecond"`
	DiskBytes              int64   `json:"diskBytes"`
	WALBytes               int64   `json:"walBytes"`
	SegmentBytes           int64   `json:"segmentBytes"`
	SegmentSamples         int64   `json:"segmentSamples"`
	BytesPerSample         float64 `json:"bytesPerSample"` // segment bytes / segment samples; 0 when none
	MemTableBytes          int64   `json:"memTableBytes"`
	ImmutableMemTables     int     `json:"immutableMemTables"`
	Flushes                int64   `json:"flushes"`
	Compactions            int64   `json:"compactions"`
	CompactionSeconds      float64 `json:"compactionSeconds"`
	PendingCompactionBytes int64   `json:"pendingCompactionBytes"`
	WriteAmplification     float64 `json:"writeAmplification"`
	WriteStalls            int64   `json:"writeStalls"`
	Tombstones             int     `json:"tombstones"`
	Stalled                bool    `json:"stalled"`
}

type levelJSON struct {
	Segments int   `json:"segments"`
	Bytes    int64 `json:"bytes"`
}

type forwardJSON struct {
	Protocol       string     `json:"protocol,omitempty"`
	LagSeconds     float64    `json:"lagSeconds"`
	BacklogSamples int64      `json:"backlogSamples"`
	BacklogBytes   int64      `json:"backlogBytes"`
	SamplesSent    int64      `json:"samplesSent"`
	SamplesDropped int64      `json:"samplesDropped"`
	Retries        int64      `json:"retries"`
	LastSuccess    *time.Time `json:"lastSuccess,omitempty"`
	LastError      string     `json:"lastError,omitempty"`
}

type mqttJSON struct {
	Connected   bool       `json:"connected"`
	Broker      string     `json:"broker,omitempty"`
	Topics      []string   `json:"topics,omitempty"`
	Messages    int64      `json:"messages"`
	Points      int64      `json:"points"`
	Errors      int64      `json:"errors"`
	LastMessage *time.Time `json:"lastMessage,omitempty"`
	LastError   string     `json:"lastError,omitempty"`
}

// latestJSON is a series' newest sample in the shape of an instant-vector
// element of the query API: value = [unix seconds, "value"].
type latestJSON struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// rateMeter turns the engine's write counters into rates, measured over
// at least a second between status requests.
type rateMeter struct {
	mu              sync.Mutex
	t               time.Time
	points, samples int64
	pps, sps        float64
}

func (m *rateMeter) reset(now time.Time, st engine.Stats) {
	m.mu.Lock()
	m.t, m.points, m.samples = now, st.PointsWritten, st.SamplesWritten
	m.mu.Unlock()
}

func (m *rateMeter) observe(now time.Time, st engine.Stats) (pps, sps float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if dt := now.Sub(m.t).Seconds(); dt >= 1 {
		m.pps = float64(st.PointsWritten-m.points) / dt
		m.sps = float64(st.SamplesWritten-m.samples) / dt
		m.t, m.points, m.samples = now, st.PointsWritten, st.SamplesWritten
	}
	return m.pps, m.sps
}

// registerPage registers the page and the status endpoint.
func (s *Server) registerPage() {
	s.started = s.opts.Now()
	s.rate.reset(s.started, s.db.Stats())
	loadPage()
	s.mux.HandleFunc("/", s.metrics.instrument("page", s.page))
	s.handle(StatusPath, "strata_status", true, s.status, http.MethodGet, http.MethodPost)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	// Live figures: never stored by a browser or proxy, never sniffed.
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if e := s.parseForm(w, r); e != nil {
		apiFail(w, e)
		return
	}
	sets, e := matchSets(r)
	if e != nil {
		apiFail(w, e)
		return
	}
	limit, e := limitParam(r)
	if e != nil {
		apiFail(w, e)
		return
	}
	if limit <= 0 || limit > maxLatest {
		limit = maxLatest
	}
	now := s.opts.Now()
	st := s.db.Stats()
	out := statusJSON{Time: now.UTC(), Started: s.started.UTC(), Latest: []latestJSON{}}
	d := &out.DB
	d.PointsPerSecond, d.SamplesPerSecond = s.rate.observe(now, st)
	d.Series, d.PointsWritten, d.SamplesWritten = st.Series, st.PointsWritten, st.SamplesWritten
	d.DiskBytes, d.WALBytes, d.SegmentSamples = st.DiskBytes, st.WALBytes, st.SegmentSamples
	for l, b := range st.BytesPerLevel {
		d.SegmentBytes += b
		n := 0
		if l < len(st.SegmentsPerLevel) {
			n = st.SegmentsPerLevel[l]
		}
		out.Levels = append(out.Levels, levelJSON{Segments: n, Bytes: b})
	}
	if d.SegmentSamples > 0 {
		d.BytesPerSample = float64(d.SegmentBytes) / float64(d.SegmentSamples)
	}
	d.MemTableBytes, d.ImmutableMemTables = st.MemTableBytes, st.ImmutableMemTables
	d.Flushes, d.Compactions = st.Flushes, st.Compactions
	d.CompactionSeconds = st.CompactionDuration.Seconds()
	d.PendingCompactionBytes, d.WriteAmplification = st.PendingCompactionBytes, st.WriteAmplification
	d.WriteStalls, d.Tombstones = st.WriteStalls, st.Tombstones
	d.Stalled = s.opts.Stalled(st)
	if f := s.opts.ForwardStatus; f != nil {
		fs := f()
		out.Forward = &forwardJSON{
			Protocol: fs.Protocol, LagSeconds: fs.Lag.Seconds(),
			BacklogSamples: fs.BacklogSamples, BacklogBytes: fs.BacklogBytes,
			SamplesSent: fs.SamplesSent, SamplesDropped: fs.SamplesDropped, Retries: fs.Retries,
			LastSuccess: timeOrNil(fs.LastSuccess), LastError: redactURLs(fs.LastError),
		}
	}
	if f := s.opts.MQTTStatus; f != nil {
		ms := f()
		out.MQTT = &mqttJSON{
			Connected: ms.Connected, Broker: redactURLs(ms.Broker), Topics: ms.Topics,
			Messages: ms.Messages, Points: ms.Points, Errors: ms.Errors,
			LastMessage: timeOrNil(ms.LastMessage), LastError: redactURLs(ms.LastError),
		}
	}
	var err error
	if out.Measurements, err = s.db.Measurements(r.Context()); err != nil {
		apiFail(w, storageError(err))
		return
	}
	if out.Measurements == nil {
		out.Measurements = []string{}
	}
	if len(sets) > 0 {
		if out.Latest, out.Truncated, err = s.latest(r, sets, limit); err != nil {
			apiFail(w, storageError(err))
			return
		}
	}
	apiData(w, out)
}

// urlInText finds the URLs an error message may quote (net/http's errors
// quote the request's URL whole).
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// redactURLs returns s with the secrets of the URLs in it hidden: the
// password of the user info and every value of the query (an InfluxDB 1.x
// URL carries its password as p=...). The rest of each URL stays, to tell
// what failed.
func redactURLs(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil {
			// Not parsable: keep the scheme and the host's side only.
			scheme, rest, _ := strings.Cut(raw, "://")
			if i := strings.LastIndex(rest, "@"); i >= 0 {
				rest = rest[i+1:]
			}
			if i := strings.IndexAny(rest, "/?#"); i >= 0 {
				rest = rest[:i]
			}
			return scheme + "://" + rest + "/" + redacted
		}
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redacted)
		}
		if u.RawQuery != "" {
			q := u.Query()
			for _, vs := range q {
				for i := range vs {
					vs[i] = redacted
				}
			}
			u.RawQuery = q.Encode()
		}
		return u.String()
	})
}

// redacted stands for a secret hidden by redactURLs.
const redacted = "xxxxx"

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// latest returns the newest numeric sample of each series the selectors
// pick, at most limit of them, sorted by label set. Values are as the
// query API sees them: float64, bool as 0/1, the time floored to ms.
//
// The operator page asks for this every few seconds, so it reads each
// candidate measurement once with Last, rather than listing the series
// first and then reading them (that took three times as long at 100,000
// series: BenchmarkStatusLatest).
func (s *Server) latest(r *http.Request, sets [][]*labels.Matcher, limit int) ([]latestJSON, bool, error) {
	ctx := r.Context()
	q := &querier{db: s.db}
	start, end, _ := nsRange(math.MinInt64, math.MaxInt64)
	type found struct {
		ls labels.Labels
		t  int64
		v  float64
	}
	var all []found
	var seen map[string]bool // series already found, when more than one selector
	if len(sets) > 1 {
		seen = map[string]bool{}
	}
	b := labels.NewScratchBuilder(8)
	for _, ms := range sets {
		meas, err := q.candidateMeasurements(ctx, ms)
		if err != nil {
			return nil, false, err
		}
		for _, m := range meas {
			pushed, err := q.pushdown(ctx, m, start, end, ms)
			if err != nil {
				return nil, false, err
			}
			res, err := s.db.Last(ctx, engine.Selector{Measurement: m, Matchers: pushed, Start: start, End: end})
			if err != nil {
				return nil, false, err
			}
			for _, sr := range res {
				if len(sr.Samples) == 0 {
					continue
				}
				smp := sr.Samples[len(sr.Samples)-1]
				v, ok := floatOf(smp.Value)
				if !ok {
					continue
				}
				ls := promLabels(&b, sr.Measurement, sr.Field, sr.Tags)
				if !matchAll(ms, ls) {
					continue
				}
				if seen != nil {
					key := engine.SeriesKey(sr.Measurement, sr.Tags, sr.Field)
					if seen[key] {
						continue
					}
					seen[key] = true
				}
				all = append(all, found{ls, floorDiv(smp.Time, int64(time.Millisecond)), v})
			}
		}
	}
	slices.SortStableFunc(all, func(a, b found) int { return labels.Compare(a.ls, b.ls) })
	truncated := len(all) > limit
	if truncated {
		all = all[:limit]
	}
	out := make([]latestJSON, len(all))
	for i, f := range all {
		out[i] = latestJSON{Metric: f.ls.Map(), Value: [2]any{
			json64(float64(f.t) / 1000), string(appendFloat(nil, f.v)),
		}}
	}
	return out, truncated, nil
}

// json64 is a float64 that encodes with up to ms precision.
type json64 float64

func (f json64) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(f), 'f', -1, 64), nil
}
