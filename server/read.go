package server

import (
	"context"
	"net/http"

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
		h.ServeHTTP(flushWriter{w}, r)
	}
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
