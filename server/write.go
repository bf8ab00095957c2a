package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/lineproto"
)

// maxReportedLines is how many rejected lines a partial-write error names.
const maxReportedLines = 10

// writeBatchPoints is the batch of a line-protocol request: one appender
// Commit (one WAL record, one fsync when durable) for a request of up to
// this many points, the 10,000 lines that clients such as Telegraf send
// included, rather than one per lineproto.DefaultBatchSize.
const writeBatchPoints = 16 << 10

// influxAPI says which InfluxDB API a write came through; it picks the
// precision names and the error body.
type influxAPI int

const (
	influxV1 influxAPI = iota + 1
	influxV2
)

func (s *Server) writeV2(w http.ResponseWriter, r *http.Request) { s.influxWrite(w, r, influxV2) }
func (s *Server) writeV1(w http.ResponseWriter, r *http.Request) { s.influxWrite(w, r, influxV1) }

// influxWrite serves the line-protocol write endpoints. The body is read
// whole (up to MaxBodyBytes after decompression) before anything is
// written, so that a body over the limit stores nothing.
func (s *Server) influxWrite(w http.ResponseWriter, r *http.Request, api influxAPI) {
	w.Header().Set("X-Influxdb-Version", InfluxDBVersion)
	unit, err := parseInfluxPrecision(r.URL.Query().Get("precision"), api)
	if err != nil {
		influxError(w, api, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	buf, status, err := s.readBody(r)
	defer putBuffer(buf)
	if err != nil {
		influxError(w, api, status, codeFor(status), err.Error())
		return
	}
	if !s.admit(r.Context()) {
		s.unavailable(w)
		influxError(w, api, http.StatusServiceUnavailable, "unavailable", "writes are stalled; retry later")
		return
	}

	opts := lineproto.Options{Now: s.opts.Now, MaxRejected: maxReportedLines, BatchSize: writeBatchPoints}
	var db lineproto.DB = s.db
	switch unit {
	case time.Nanosecond:
	case time.Microsecond:
		opts.Precision = lineproto.Microsecond
	case time.Millisecond:
		opts.Precision = lineproto.Millisecond
	case time.Second:
		opts.Precision = lineproto.Second
	default: // minutes and hours: lineproto reads raw units, scaledDB scales
		u := int64(unit)
		now := s.opts.Now
		opts.Now = func() time.Time { return time.Unix(0, now().UnixNano()/u) }
		db = &scaledDB{db: s.db, unit: u}
	}
	res, err := lineproto.Write(r.Context(), db, buf, opts) // read in place
	s.metrics.pointsWritten.Add(float64(res.Points))
	s.metrics.linesRejected.Add(float64(res.RejectedCount))
	if err != nil {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			influxError(w, api, http.StatusServiceUnavailable, "unavailable", "request cancelled: "+err.Error())
		case errors.Is(err, engine.ErrClosed):
			s.unavailable(w)
			influxError(w, api, http.StatusServiceUnavailable, "unavailable", "database is closed")
		case errors.Is(err, engine.ErrReadOnly):
			influxError(w, api, http.StatusForbidden, "forbidden", "database is read-only")
		default:
			s.opts.Logger.Error("line protocol write", "err", err, "points", res.Points)
			influxError(w, api, http.StatusInternalServerError, "internal error", err.Error())
		}
		return
	}
	if res.RejectedCount == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	influxError(w, api, http.StatusBadRequest, "invalid", partialMessage(res))
}

// partialMessage names the first rejected lines of res, as "line N: reason".
func partialMessage(res lineproto.Result) string {
	var b strings.Builder
	b.WriteString("partial write: ")
	for i, le := range res.Rejected {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(le.Error())
	}
	if more := res.RejectedCount - len(res.Rejected); more > 0 {
		fmt.Fprintf(&b, "; and %d more", more)
	}
	fmt.Fprintf(&b, " dropped=%d written=%d", res.RejectedCount, res.Points)
	return b.String()
}

func codeFor(status int) string {
	switch status {
	case http.StatusRequestEntityTooLarge:
		return "request too large"
	case http.StatusBadRequest:
		return "invalid"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	return "internal error"
}

// influxError writes InfluxDB's error body: {"code":...,"message":...} for
// the 2.x API and {"error":...} for 1.x.
func influxError(w http.ResponseWriter, api influxAPI, status int, code, msg string) {
	if api == influxV1 {
		writeJSON(w, status, map[string]string{"error": msg})
		return
	}
	writeJSON(w, status, map[string]string{"code": code, "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// unavailable sets Retry-After for a 503.
func (s *Server) unavailable(w http.ResponseWriter) {
	secs := int64(math.Ceil(s.opts.RetryAfter.Seconds()))
	w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
}

// stallPoll is how often a write waiting for a stalled engine looks again.
const stallPoll = 10 * time.Millisecond

// admit reports whether a write may go to the engine: it is not stalled,
// or stops being stalled within StallWait.
func (s *Server) admit(ctx context.Context) bool {
	if !s.opts.Stalled(s.db.Stats()) {
		return true
	}
	if s.opts.StallWait < 0 {
		s.metrics.stalled.Inc()
		return false
	}
	deadline := time.NewTimer(s.opts.StallWait)
	defer deadline.Stop()
	tick := time.NewTicker(stallPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			s.metrics.stalled.Inc()
			return false
		case <-tick.C:
			if !s.opts.Stalled(s.db.Stats()) {
				return true
			}
		}
	}
}

// parseInfluxPrecision returns the unit that precision names for api.
func parseInfluxPrecision(p string, api influxAPI) (time.Duration, error) {
	switch p {
	case "", "ns":
		return time.Nanosecond, nil
	case "us":
		return time.Microsecond, nil
	case "ms":
		return time.Millisecond, nil
	case "s":
		return time.Second, nil
	}
	if api == influxV1 {
		switch p {
		case "n":
			return time.Nanosecond, nil
		case "u", "µ":
			return time.Microsecond, nil
		case "m":
			return time.Minute, nil
		case "h":
			return time.Hour, nil
		}
		return 0, fmt.Errorf("invalid precision %q (use n, u, ms, s, m or h)", p)
	}
	return 0, fmt.Errorf("invalid precision %q (use ns, us, ms or s)", p)
}

// scaledDB multiplies the timestamps of the points it writes by unit, for
// the precisions that lineproto does not know (minutes, hours).
type scaledDB struct {
	db   *engine.DB
	unit int64
	pts  []engine.Point
}

func (d *scaledDB) Write(points []engine.Point) error {
	d.pts = append(d.pts[:0], points...)
	defer clear(d.pts)
	for i := range d.pts {
		t := d.pts[i].Time
		if t > math.MaxInt64/d.unit || t < math.MinInt64/d.unit {
			return &engine.PointError{Index: i,
				Err: fmt.Errorf("%w: timestamp %d out of range at this precision", engine.ErrInvalid, t)}
		}
		d.pts[i].Time = t * d.unit
	}
	return d.db.Write(d.pts)
}

// errTooLarge is the reason of a 413.
var errTooLarge = errors.New("request body too large")

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuffer is the largest buffer kept for reuse.
const maxPooledBuffer = 4 << 20

func putBuffer(b *bytes.Buffer) {
	if b == nil || b.Cap() > maxPooledBuffer {
		return
	}
	b.Reset()
	bufPool.Put(b)
}

var gzipPool sync.Pool

// readBody reads r's body, decompressed, into a pooled buffer of at most
// MaxBodyBytes. On error it returns the status to answer with.
func (s *Server) readBody(r *http.Request) (*bytes.Buffer, int, error) {
	limit := s.opts.MaxBodyBytes
	buf := bufPool.Get().(*bytes.Buffer)
	var body io.Reader = r.Body
	enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
	switch enc {
	case "", "identity":
		if r.ContentLength > limit {
			return buf, http.StatusRequestEntityTooLarge, fmt.Errorf("%w: %d bytes, limit %d", errTooLarge, r.ContentLength, limit)
		}
		if r.ContentLength > 0 {
			// ReadFrom wants MinRead bytes free to see the end: without
			// them a body of the announced length would double the buffer.
			buf.Grow(int(r.ContentLength) + bytes.MinRead)
		}
	case "gzip", "x-gzip":
		zr, _ := gzipPool.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(r.Body)
		} else {
			err = zr.Reset(r.Body)
		}
		if err != nil {
			return buf, http.StatusBadRequest, fmt.Errorf("gzip body: %w", err)
		}
		defer gzipPool.Put(zr)
		body = zr
	default:
		return buf, http.StatusUnsupportedMediaType, fmt.Errorf("unsupported Content-Encoding %q", enc)
	}
	n, err := buf.ReadFrom(io.LimitReader(body, limit+1))
	if err != nil {
		return buf, http.StatusBadRequest, fmt.Errorf("read body: %w", err)
	}
	if n > limit {
		return buf, http.StatusRequestEntityTooLarge, fmt.Errorf("%w: over the limit of %d bytes", errTooLarge, limit)
	}
	return buf, 0, nil
}
