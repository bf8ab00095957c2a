package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/golang/snappy"

	"github.com/stratadb/strata/engine"
)

// msNanos is nanoseconds per millisecond.
const msNanos = int64(time.Millisecond)

// remoteBatch is the number of points per db.Write of a remote write.
const remoteBatch = 5000

// remoteWrite serves Prometheus remote write 1.0: a snappy-compressed
// protobuf WriteRequest. Each sample becomes a point of measurement
// __name__, the other labels as tags (empty values, which Prometheus treats
// as absent, are dropped) and the float field "value", at its ms timestamp
// in ns. Staleness markers and other NaN or infinite samples are skipped
// and counted. A body that does not decode is 400 with nothing stored. A
// body is decoded in place (remote_decode.go), so that no message shape
// costs more than a small multiple of its size.
//
// A series is refused, none of it stored, where Prometheus' own receiver
// refuses it (no metric name, a label name or value that is not UTF-8, an
// empty or duplicate label name), where it has more labels than the engine
// takes, and where the engine refuses it; refusals are counted by reason
// in strata_remote_write_series_refused_total. The other series of the
// request are stored and the answer is 400 naming the first refusals:
// what Prometheus' remote-write 2.0 receiver answers, and what its 1.0
// receiver's authors say the 1.0 spec asks (that receiver answers 204 and
// only counts). A sender does not retry a 400, so nothing stored is sent
// twice, and its operator sees the refusal.
func (s *Server) remoteWrite(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, params, _ := strings.Cut(ct, ";"); strings.TrimSpace(mt) != "application/x-protobuf" ||
			(params != "" && !strings.Contains(params, "prometheus.WriteRequest")) {
			http.Error(w, fmt.Sprintf("unsupported Content-Type %q: remote write 1.0 wants application/x-protobuf", ct),
				http.StatusUnsupportedMediaType)
			return
		}
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "snappy") {
		http.Error(w, fmt.Sprintf("unsupported Content-Encoding %q: remote write wants snappy", enc),
			http.StatusUnsupportedMediaType)
		return
	}
	limit := s.opts.MaxBodyBytes
	// A snappy block is never much larger than its input.
	maxCompressed := int64(snappy.MaxEncodedLen(int(min(limit, math.MaxInt32))))
	if maxCompressed < 0 || r.ContentLength > maxCompressed {
		http.Error(w, errTooLarge.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	buf := bufPool.Get().(*bytes.Buffer)
	defer putBuffer(buf)
	n, err := buf.ReadFrom(io.LimitReader(r.Body, maxCompressed+1))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if n > maxCompressed {
		http.Error(w, errTooLarge.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	dlen, err := snappy.DecodedLen(buf.Bytes())
	if err != nil {
		http.Error(w, "snappy: "+err.Error(), http.StatusBadRequest)
		return
	}
	if int64(dlen) > limit {
		http.Error(w, fmt.Sprintf("%v: decoded body of %d bytes over the limit of %d", errTooLarge, dlen, limit),
			http.StatusRequestEntityTooLarge)
		return
	}
	raw, err := snappy.Decode(make([]byte, dlen), buf.Bytes())
	if err != nil {
		http.Error(w, "snappy: "+err.Error(), http.StatusBadRequest)
		return
	}
	_, histograms, err := checkWriteRequest(raw)
	if err != nil {
		http.Error(w, "protobuf: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !s.admit(r.Context()) {
		s.unavailable(w)
		http.Error(w, "writes are stalled; retry later", http.StatusServiceUnavailable)
		return
	}
	st := newRemoteStore(s)
	err = st.store(raw)
	st.count()
	if histograms > 0 {
		s.metrics.remoteHistograms.Add(float64(histograms))
	}
	switch {
	case errors.Is(err, engine.ErrClosed):
		s.unavailable(w)
		http.Error(w, "database is closed", http.StatusServiceUnavailable)
	case errors.Is(err, engine.ErrReadOnly):
		http.Error(w, "database is read-only", http.StatusForbidden)
	case err != nil:
		s.opts.Logger.Error("remote write", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
	case st.nRejected > 0:
		msg := strings.Join(st.msgs, "; ")
		if more := st.nRejected - len(st.msgs); more > 0 {
			msg += fmt.Sprintf("; and %d more", more)
		}
		s.opts.Logger.Warn("remote write: series or samples refused", "refused", st.nRejected, "first", st.msgs[0])
		http.Error(w, "partial write: "+msg, http.StatusBadRequest)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}
