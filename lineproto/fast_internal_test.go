package lineproto

import (
	"testing"
	"time"

	"github.com/stratadb/strata/internal/point"
)

// TestFastPathTakesPlainLines checks that the fast path takes the forms
// collectors write, so that FuzzFastPath compares it with the decoder on
// them, and declines what it leaves to the decoder.
func TestFastPathTakesPlainLines(t *testing.T) {
	w := getWriter() // not given back: it holds this test's points
	w.opts.Now = func() time.Time { return time.Unix(0, 0) }
	w.unit = 1
	s := &series{measurement: "cpu", tags: []point.Tag{{Key: "host", Value: "a"}}}
	for _, c := range []struct {
		line   string
		fields int
		time   int64
	}{
		{" v=1 1700000000000000000", 1, 1700000000000000000},
		{" v=1.25,w=-3i,u=7u,b=t,c=FALSE -5", 5, -5},
		{"   v=1   42   \r", 1, 42},
		{" v=1,v=2 3", 1, 3},
		{" v=1", 1, 0},
		{" v=1 ", 1, 0},
	} {
		if !w.addFast([]byte(c.line), s, 7) {
			t.Errorf("%q declined", c.line)
			continue
		}
		p := w.points[len(w.points)-1]
		if w.lines[len(w.lines)-1] != 7 {
			t.Errorf("%q: line %d", c.line, w.lines[len(w.lines)-1])
		}
		if p.Measurement != "cpu" || len(p.Tags) != 1 || len(p.Fields) != c.fields || p.Time != c.time {
			t.Errorf("%q: %+v", c.line, p)
		}
	}
	tags, fields, points := len(w.tags), len(w.fields), len(w.points)
	for _, line := range []string{
		" v=\"s\" 1", " v\\ w=1 1", " é=1 1", " v=1,", " v=1,,w=2", " v=1, w=2",
		" =1", " v", " v=", " v=i 1", " v=1.2.3 1", " v=1e999 1", " v=1 1-2",
		" v=1 1 2", " v=1 abc", " v=1\r 2", " v=1\x01 1", "v=1 1", " v=1 99999999999999999999", " v=1 +5", " v=1 5+",
	} {
		if w.addFast([]byte(line), s, 8) {
			t.Errorf("%q taken", line)
		}
		if len(w.tags) != tags || len(w.fields) != fields || len(w.points) != points {
			t.Fatalf("%q left %d tags and %d fields behind", line, len(w.tags)-tags, len(w.fields)-fields)
		}
	}
}
