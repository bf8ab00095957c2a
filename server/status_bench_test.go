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
	pts := make([]engine.Point, 0, 10_000)
	for i := range series {
		pts = append(pts, engine.Point{
			Measurement: "cpu",
			Tags:        []engine.Tag{{Key: "host", Value: "h" + strconv.Itoa(i)}},
			Fields:      []engine.Field{{Key: "usage", Value: engine.Float(float64(i))}},
			Time:        int64(i+1) * 1e6,
		})
		if len(pts) == cap(pts) {
			if err := ts.db.Write(pts); err != nil {
				b.Fatal(err)
			}
			pts = pts[:0]
		}
	}
	if err := ts.db.Flush(); err != nil {
		b.Fatal(err)
	}
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
