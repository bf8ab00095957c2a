package server

import (
	"fmt"
	"net/url"
	"strconv"
	"testing"

	"github.com/stratadb/strata/engine"
)

// BenchmarkStatusLatest times the status request the operator page sends
// every few seconds while a measurement is selected: the newest sample of
// at most 1,000 of its series, here a measurement of 100,000 series.
func BenchmarkStatusLatest(b *testing.B) {
	const series = 100_000
	ts := newTestServer(b, nil)
	writeHosts(b, ts.db, series)
	q := url.Values{"limit": {"1000"}, "match[]": {`{__name__=~"cpu|cpu_.+"}`}}
	path := "/api/v1/status/strata?" + q.Encode()
	b.ReportAllocs()
	for b.Loop() {
		code, _, body := ts.do("GET", path, nil)
		if code != 200 {
			b.Fatal(code, body)
		}
	}
	b.StopTimer()
	if code, _, body := ts.do("GET", path, nil); code != 200 || len(body) < series/100 {
		b.Fatal(code, fmt.Sprintf("%.200s", body))
	}
}

// BenchmarkSeriesLimit times the series list the operator page asks for
// when a measurement is selected: at most 5,000 of its series, here of
// 100,000.
func BenchmarkSeriesLimit(b *testing.B) {
	ts := newTestServer(b, nil)
	writeHosts(b, ts.db, 100_000)
	q := url.Values{"limit": {"5000"}, "match[]": {`{__name__=~"cpu|cpu_.+"}`}}
	path := "/api/v1/series?" + q.Encode()
	b.ReportAllocs()
	for b.Loop() {
		if code, _, body := ts.do("GET", path, nil); code != 200 {
			b.Fatal(code, body)
		}
	}
}

// writeHosts stores one sample of cpu,host=h<i> usage for i < n, flushed.
func writeHosts(b *testing.B, db *engine.DB, n int) {
	pts := make([]engine.Point, 0, 10_000)
	for i := range n {
		pts = append(pts, engine.Point{
			Measurement: "cpu",
			Tags:        []engine.Tag{{Key: "host", Value: "h" + strconv.Itoa(i)}},
			Fields:      []engine.Field{{Key: "usage", Value: engine.Float(float64(i))}},
			Time:        int64(i+1) * 1e6,
		})
		if len(pts) == cap(pts) || i == n-1 {
			if err := db.Write(pts); err != nil {
				b.Fatal(err)
			}
			pts = pts[:0]
		}
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
}
