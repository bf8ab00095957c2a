package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/storage/remote"
)

// Remote read limits.
const (
	// remoteReadConcurrency is how many remote reads run at once; more
	// wait.
	remoteReadConcurrency = 10
	// remoteReadFrameBytes is the largest frame of a streamed response,
	// Prometheus' default.
	remoteReadFrameBytes = 1 << 20
)

// newRemoteReadHandler serves Prometheus remote read (POST /api/v1/read)
// with Prometheus' own handler over the storage adapter that the query API
// uses, so series, labels and samples are the same as PromQL sees them. It
// answers with raw samples (SAMPLES) or, when the client accepts them,
// streamed XOR chunks (STREAMED_XOR_CHUNKS), negotiated by Prometheus'
// rules. A request body is bounded by Prometheus' decode limit (32 MiB
// decoded); a SAMPLES answer by MaxSamples.
func newRemoteReadHandler(s *Server) http.HandlerFunc {
	cfg := config.DefaultConfig
	h := remote.NewReadHandler(s.opts.Logger, nil, readQueryable{s.store},
		func() config.Config { return cfg }, s.opts.MaxSamples, remoteReadConcurrency, remoteReadFrameBytes)
	return func(w http.ResponseWriter, r *http.Request) {
		// Prometheus' handler answers 500 for a matcher it cannot build (a
		// regexp that does not compile, an unknown type): the client's
		// mistake, so it is refused here as a 400 first. The body is read
		// once, within the handler's own limit, and handed on.
		raw, err := io.ReadAll(io.LimitReader(r.Body, remoteReadBodyBytes+1))
		if err != nil {
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(raw) > remoteReadBodyBytes {
			http.Error(w, fmt.Sprintf("request body over %d bytes", remoteReadBodyBytes), http.StatusRequestEntityTooLarge)
			return
		}
		if err := checkReadMatchers(raw); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		h.ServeHTTP(flushWriter{w}, r)
	}
}

// remoteReadBodyBytes is the most a remote-read request body may hold, as
// Prometheus' handler reads it (and its decoded size).
const remoteReadBodyBytes = 32 << 20

// checkReadMatchers returns an error naming the first matcher of a
// remote-read request that cannot be built. A body that does not decode
// passes: Prometheus' handler refuses it with its own message.
func checkReadMatchers(raw []byte) error {
	n, err := snappy.DecodedLen(raw)
	if err != nil || n > remoteReadBodyBytes {
		return nil
	}
	dec, err := snappy.Decode(nil, raw)
	if err != nil {
		return nil
	}
	var req prompb.ReadRequest
	if req.Unmarshal(dec) != nil {
		return nil
	}
	for i, q := range req.Queries {
		if _, err := remote.FromLabelMatchers(q.Matchers); err != nil {
			return fmt.Errorf("query %d: invalid matcher: %w", i, err)
		}
	}
	return nil
}

// flushWriter gives the streamed response the http.Flusher it asserts,
// through the wrappers (metrics) around the connection's writer.
type flushWriter struct{ http.ResponseWriter }

func (w flushWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// readQueryable adds the chunk querier that streamed remote read needs to
// the storage adapter: samples are encoded into XOR chunks as they are read.
type readQueryable struct{ *Storage }

func (q readQueryable) ChunkQuerier(mint, maxt int64) (storage.ChunkQuerier, error) {
	qr, err := q.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return chunkQuerier{qr}, nil
}

type chunkQuerier struct{ storage.Querier }

func (c chunkQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.ChunkSeriesSet {
	return storage.NewSeriesSetToChunkSet(c.Querier.Select(ctx, sortSeries, hints, ms...))
}
