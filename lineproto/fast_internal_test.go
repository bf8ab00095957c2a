package lineproto

import (
	"testing"
	"time"

	"github.com/stratadb/strata/internal/point"
)

// TestParseFastTakesPlainLines checks that the fast path takes the forms
// collectors write, so that FuzzFastPath compares it with the decoder on
// them, and declines what it leaves to the decoder.
func TestParseFastTakesPlainLines(t *testing.T) {
	w := getWriter()
	defer putWriter(w)
	w.opts.Now = func() time.Time { return time.Unix(0, 0) }
	w.unit = 1
	e := entry{series: &series{measurement: "cpu", tags: []point.Tag{{Key: "host", Value: "a"}}}}
	for _, c := range []struct {
		line   string
		fields int
		time   int64
	}{
		{"x v=1 1700000000000000000", 1, 1700000000000000000},
		{"x v=1.25,w=-3i,u=7u,b=t,c=FALSE -5", 5, -5},
		{"x   v=1   42   \r", 1, 42},
		{"x v=1,v=2 3", 1, 3},
		{"x v=1", 1, 0},
		{"x v=1 ", 1, 0},
	} {
		p, ok := w.parseFast([]byte(c.line), e)
		if !ok {
			t.Errorf("%q declined", c.line)
			continue
		}
		if p.Measurement != "cpu" || len(p.Tags) != 1 || len(p.Fields) != c.fields || p.Time != c.time {
			t.Errorf("%q: %+v", c.line, p)
		}
	}
	tags, fields := len(w.tags), len(w.fields)
	for _, line := range []string{
		"x v=\"s\" 1", "x v\\ w=1 1", "x é=1 1", "x v=1,", "x v=1,,w=2", "x v=1, w=2",
		"x =1", "x v", "x v=", "x v=i 1", "x v=1.2.3 1", "x v=1e999 1", "x v=1 1-2",
		"x v=1 1 2", "x v=1 abc", "x v=1\r 2", "x v=1\x01 1", "xv=1 1", "x v=1 99999999999999999999",
	} {
		if _, ok := w.parseFast([]byte(line), e); ok {
			t.Errorf("%q taken", line)
		}
		if len(w.tags) != tags || len(w.fields) != fields {
			t.Fatalf("%q left %d tags and %d fields behind", line, len(w.tags)-tags, len(w.fields)-fields)
		}
	}
}
