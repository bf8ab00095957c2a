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
type strataHTTPStore struct {
	strataStore
	srv    *http.Server
	url    string
	client *http.Client
	body   bytes.Buffer
}

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
		client:      &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}},
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

// write posts the batch as one line-protocol request.
func (s *strataHTTPStore) write(points []engine.Point) error {
	s.body.Reset()
	b := s.body.AvailableBuffer()
	for i := range points {
		var err error
		if b, err = appendLine(b, &points[i]); err != nil {
			return err
		}
	}
	s.body.Write(b)
	resp, err := s.client.Post(s.url, "text/plain; charset=utf-8", bytes.NewReader(s.body.Bytes()))
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

// close stops the server, then closes the database.
func (s *strataHTTPStore) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	s.client.CloseIdleConnections()
	return errors.Join(err, s.db.Close())
}
