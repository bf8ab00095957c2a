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
	"slices"
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
// The insert phase posts through writeAsync: the client encodes the next
// batch while the previous request is in flight, and the requests go one
// at a time, in order, so the server sees the batches as the other rows'
// engines do (two requests in flight at once interleave the batches, which
// costs the memtable out-of-order appends: 80 instead of 59 MB allocated
// per million points). write (the mixed workload's, whose latencies are
// measured) posts one request and waits for its answer.
type strataHTTPStore struct {
	strataStore
	srv    *http.Server
	url    string
	client *http.Client
	body   bytes.Buffer

	free     chan *bytes.Buffer // bodies of writeAsync not in use
	send     chan *bytes.Buffer // bodies encoded, for the sender
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

// httpBodies is how many encoded bodies writeAsync keeps: the one in
// flight and the next.
const httpBodies = 2

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
		client:      &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}},
		free:        make(chan *bytes.Buffer, httpBodies),
	}
	for range httpBodies {
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

// appendEscaped appends s escaped by r, which escapes commas, spaces and,
// if eq, equal signs. Names rarely need an escape, so they are looked at
// first and copied as they are: the replacer costs more than the rest of a
// line's encoding.
func appendEscaped(b []byte, s string, r *strings.Replacer, eq bool) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == ',' || c == ' ' || c == '=' && eq {
			return append(b, r.Replace(s)...)
		}
	}
	return append(b, s...)
}

// appendLine appends p as one line of line protocol.
func appendLine(b []byte, p *engine.Point) ([]byte, error) {
	b = appendEscaped(b, p.Measurement, lpMeasurement, false)
	for _, t := range p.Tags {
		b = append(b, ',')
		b = appendEscaped(b, t.Key, lpKey, true)
		b = append(b, '=')
		b = appendEscaped(b, t.Value, lpKey, true)
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
		b = appendEscaped(b, p.Fields[f].Key, lpKey, true)
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

// writeAsync encodes the batch and hands it to the sender, which posts
// the batches one at a time, in order: the next batch is encoded while a
// request is in flight. A failed request fails a later writeAsync, wait or
// close.
func (s *strataHTTPStore) writeAsync(points []engine.Point) error {
	if err := s.firstErr(); err != nil {
		return err
	}
	body := <-s.free
	if err := encodeBatch(body, points); err != nil {
		s.free <- body
		return err
	}
	if s.send == nil {
		s.send = make(chan *bytes.Buffer, httpBodies-1)
		go s.sender()
	}
	s.inflight.Add(1)
	s.send <- body
	return nil
}

// sender posts the bodies of writeAsync in order.
func (s *strataHTTPStore) sender() {
	for body := range s.send {
		if err := s.post(body.Bytes()); err != nil {
			s.errMu.Lock()
			if s.err == nil {
				s.err = err
			}
			s.errMu.Unlock()
		}
		s.free <- body
		s.inflight.Done()
	}
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

// encodeBatch writes points to body as line protocol. A body too small
// for the batch is sized once, from its first line, rather than grown by
// doubling.
func encodeBatch(body *bytes.Buffer, points []engine.Point) error {
	body.Reset()
	b := body.AvailableBuffer()
	for i := range points {
		n := len(b)
		var err error
		if b, err = appendLine(b, &points[i]); err != nil {
			return err
		}
		if i == 0 {
			if want := (len(b) - n) * (len(points) + len(points)/8); cap(b) < want {
				b = slices.Grow(b, want-len(b))
			}
		}
	}
	if cap(b) > body.Cap() {
		*body = *bytes.NewBuffer(b) // b outgrew the body: it becomes the body
		return nil
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
	if s.send != nil {
		close(s.send)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := errors.Join(werr, s.srv.Shutdown(ctx))
	s.client.CloseIdleConnections()
	return errors.Join(err, s.db.Close())
}
