package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/server"
)

// strataHTTPStore is strata ingesting over HTTP: Open starts `strata
// serve`'s handler (server.New) on a loopback port in front of a database
// opened as strataStore opens it, and each batch is encoded as line
// protocol, one line per point, and posted to /api/v2/write?precision=ns
// in one request (10,000 lines with the default batch). The time counts
// the client's encoding, the loopback round trip, the server's parsing and
// the engine's write; the server runs in the same process as the client.
// Queries go to the database directly: the row measures ingest.
//
// The insert phase posts through writeAsync: httpClients requests in
// flight, as a client such as Telegraf with two writers does, so that one
// batch is encoded and parsed while another is stored. write (the mixed
// workload's, whose latencies are measured) posts one request and waits
// for its answer.
type strataHTTPStore struct {
	strataStore
	srv    *http.Server
	url    string
	client *http.Client
	body   bytes.Buffer

	free     chan *bytes.Buffer // bodies of writeAsync not in flight
	inflight sync.WaitGroup
	errMu    sync.Mutex
	err      error // the first failure of a request in flight
}

// pipeliner is a store whose insert phase may keep several batches in
// flight: writeAsync returns once the batch is taken (the points may be
// reused), and close returns once every batch is stored.
type pipeliner interface {
	writeAsync(points []engine.Point) error
}

// httpClients is how many requests writeAsync keeps in flight.
const httpClients = 2

func openStrataHTTP(dir string, cfg Config, dur Durability) (store, error) {
	db, err := engine.Open(dir, strataOptions(cfg, dur))
	if err != nil {
		return nil, err
	}
	h, err := server.New(db, &server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		db.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &strataHTTPStore{
		strataStore: strataStore{db},
		srv:         &http.Server{Handler: h},
		url:         "http://" + ln.Addr().String() + "/api/v2/write?precision=ns",
		client:      &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: httpClients}},
		free:        make(chan *bytes.Buffer, httpClients),
	}
	for range httpClients {
		s.free <- new(bytes.Buffer)
	}
	go s.srv.Serve(ln)
	return s, nil
}

// Line protocol escapes: measurement, tag keys and values, field keys.
var (
	lpMeasurement = strings.NewReplacer(`,`, `\,`, ` `, `\ `)
	lpKey         = strings.NewReplacer(`,`, `\,`, `=`, `\=`, ` `, `\ `)
)

// appendLine appends p as one line of line protocol.
func appendLine(b []byte, p *engine.Point) ([]byte, error) {
	b = append(b, lpMeasurement.Replace(p.Measurement)...)
	for _, t := range p.Tags {
		b = append(b, ',')
		b = append(b, lpKey.Replace(t.Key)...)
		b = append(b, '=')
		b = append(b, lpKey.Replace(t.Value)...)
	}
	for f := range p.Fields {
		v, err := floatValue(p, f)
		if err != nil {
			return b, err
		}
		if f == 0 {
			b = append(b, ' ')
		} else {
			b = append(b, ',')
		}
		b = append(b, lpKey.Replace(p.Fields[f].Key)...)
		b = append(b, '=')
		// The shortest decimal that parses back to the same float.
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	b = append(b, ' ')
	b = strconv.AppendInt(b, p.Time, 10)
	return append(b, '\n'), nil
}

// write posts the batch as one line-protocol request and waits for its
// answer.
func (s *strataHTTPStore) write(points []engine.Point) error {
	if err := s.wait(); err != nil {
		return err
	}
	if err := encodeBatch(&s.body, points); err != nil {
		return err
	}
	return s.post(s.body.Bytes())
}

// writeAsync encodes the batch and posts it in the background, with at
// most httpClients requests in flight: it waits for a free one. A failed
// request fails a later writeAsync, wait or close.
func (s *strataHTTPStore) writeAsync(points []engine.Point) error {
	if err := s.firstErr(); err != nil {
		return err
	}
	body := <-s.free
	if err := encodeBatch(body, points); err != nil {
		s.free <- body
		return err
	}
	s.inflight.Add(1)
	go func() {
		defer s.inflight.Done()
		if err := s.post(body.Bytes()); err != nil {
			s.errMu.Lock()
			if s.err == nil {
				s.err = err
			}
			s.errMu.Unlock()
		}
		s.free <- body
	}()
	return nil
}

func (s *strataHTTPStore) firstErr() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

// wait waits for the requests in flight and returns the first failure.
func (s *strataHTTPStore) wait() error {
	s.inflight.Wait()
	return s.firstErr()
}

func (s *strataHTTPStore) query(ctx context.Context, q engine.Query, rs *resultSet) error {
	if err := s.wait(); err != nil {
		return err
	}
	return s.strataStore.query(ctx, q, rs)
}

// encodeBatch writes points to body as line protocol.
func encodeBatch(body *bytes.Buffer, points []engine.Point) error {
	body.Reset()
	b := body.AvailableBuffer()
	for i := range points {
		var err error
		if b, err = appendLine(b, &points[i]); err != nil {
			return err
		}
	}
	body.Write(b)
	return nil
}

// post posts one line-protocol body.
func (s *strataHTTPStore) post(body []byte) error {
	resp, err := s.client.Post(s.url, "text/plain; charset=utf-8", bytes.NewReader(body))
	if err != nil {
		return err
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("bench: /api/v2/write: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// close waits for the requests in flight, stops the server, then closes
// the database.
func (s *strataHTTPStore) close() error {
	werr := s.wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := errors.Join(werr, s.srv.Shutdown(ctx))
	s.client.CloseIdleConnections()
	return errors.Join(err, s.db.Close())
}
