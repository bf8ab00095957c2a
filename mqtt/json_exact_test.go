package mqtt

import (
	"errors"
	"testing"
	"time"
)

// TestJSONRFC3339TimeOutOfRange checks that an RFC 3339 time outside what
// a point can hold (int64 Unix ns: 1677 to 2262) rejects its reading, as
// a numeric one does, instead of being stored at a wrapped-around time.
func TestJSONRFC3339TimeOutOfRange(t *testing.T) {
	m := JSONMapping{Time: "t"}
	d := &jsonDecoder{m: &m}
	for _, ts := range []string{"2300-01-01T00:00:00Z", "1600-01-01T00:00:00Z", "9999-12-31T23:59:59Z"} {
		pts, err := d.decode("a", []byte(`{"t":"`+ts+`","v":1}`), time.Unix(100, 0), nil)
		if !errors.Is(err, ErrPayload) || len(pts) != 0 {
			t.Errorf("%s: points %v, err %v; want no point and ErrPayload", ts, pts, err)
		}
	}
	// The ends of the range are kept exactly.
	for _, ts := range []string{"1677-09-21T00:12:43.145224192Z", "2262-04-11T23:47:16.854775807Z"} {
		pts, err := d.decode("a", []byte(`{"t":"`+ts+`","v":1}`), time.Unix(100, 0), nil)
		want, _ := time.Parse(time.RFC3339Nano, ts)
		if err != nil || len(pts) != 1 || pts[0].Time != want.UnixNano() {
			t.Errorf("%s: points %v, err %v; want one point at %d", ts, pts, err, want.UnixNano())
		}
	}
}

// TestJSONIntegerTimeExact: an integer time in ms, us or ns is stored to
// the nanosecond. Decoded as a float64 (15 to 17 digits) and multiplied
// in floating point, 1700000000001 ms became 1700000000000999936 ns, and
// ns times lost their last digits: readings under 256 ns apart merged.
func TestJSONIntegerTimeExact(t *testing.T) {
	for _, c := range []struct {
		unit, ts string
		want     int64
	}{
		{"ms", "1700000000001", 1700000000001000000},
		{"us", "1700000000000001", 1700000000000001000},
		{"ns", "1700000000000000001", 1700000000000000001},
		{"ns", "9223372036854775807", 9223372036854775807},
		{"ns", "-9223372036854775808", -9223372036854775808},
		{"s", "1700000001", 1700000001000000000},
		{"ms", "1.5", 1500000},
		{"s", "-2", -2000000000},
	} {
		m := JSONMapping{Time: "t", TimeUnit: c.unit}
		d := &jsonDecoder{m: &m}
		pts, err := d.decode("a", []byte(`{"t":`+c.ts+`,"v":1}`), time.Unix(100, 0), nil)
		if err != nil || len(pts) != 1 || pts[0].Time != c.want {
			t.Errorf("%s %s: points %v, err %v; want time %d", c.ts, c.unit, pts, err, c.want)
		}
	}
	// Beyond int64 ns, and numbers beyond float64 anywhere, as before.
	d := &jsonDecoder{m: &JSONMapping{Time: "t", TimeUnit: "ms"}}
	for _, payload := range []string{`{"t":9223372036854776,"v":1}`, `{"t":1,"v":1e400}`, `{"t":1,"v":1} x`, `{"t":1,"v":1}]`, `{"t":1,"v":1}{}`, ``} {
		if pts, err := d.decode("a", []byte(payload), time.Unix(100, 0), nil); !errors.Is(err, ErrPayload) || len(pts) != 0 {
			t.Errorf("%s: points %v, err %v; want no point and ErrPayload", payload, pts, err)
		}
	}
	// Numbers stay floats: fields, and tags as text.
	d = &jsonDecoder{m: &JSONMapping{Measurement: "m", Tags: []string{"id"}}}
	pts, err := d.decode("a", []byte(`{"id":7.50,"v":12345678901234567890}`), time.Unix(100, 0), nil)
	if err != nil || len(pts) != 1 || pointText(pts[0]) != "m,id=7.5 v=1.2345678901234567e+19 100000000000" {
		t.Errorf("points %v, err %v", pts, err)
	}
}
