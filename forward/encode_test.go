package forward

import (
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/promname"
)

// Label names are the query API's (server.LabelName, promname.Label):
// sanitized per character, a multi-byte character one '_', an invalid byte
// one '_' each. The metric name is the query API's m_f sanitized, colons
// kept (the query API shows it unsanitized).
func TestPromNamesAsQueryAPI(t *testing.T) {
	for _, k := range []string{
		"temp", "tempé", "é", "é1", "日本", "a\xffb", "\xff\xfe", "\xc3", "1a", "9", "a1", "_1",
		"", "__x", "a:b", "a.b-c d", "a\x00b", "\U0001F600x",
	} {
		info := engine.SeriesInfo{Measurement: "m", Field: "value", Tags: []engine.Tag{{Key: k, Value: "v"}}}
		got := oneSeriesRequest(t, info)
		ls := []string{`__name__="m"`, promname.Label(k) + `="v"`}
		slices.Sort(ls) // as sent
		want := "{" + strings.Join(ls, ",") + "}"
		if len(got) != 1 || got[0].series != want {
			t.Errorf("tag key %q: got %+v, want %s", k, got, want)
		}
	}
	// Pinned, in case the shared rule changes under both sides.
	for k, want := range map[string]string{"tempé": "temp_", "日本": "__", "a\xffb": "a_b", "1a": "_a", "": "_", "a:b": "a_b"} {
		if got := promname.Label(k); got != want {
			t.Errorf("promname.Label(%q) = %q, want %q", k, got, want)
		}
	}
	// A tag key that becomes __name__ is left out, as the query API does.
	got := oneSeriesRequest(t, engine.SeriesInfo{Measurement: "m", Field: "value", Tags: []engine.Tag{{Key: "__name__", Value: "x"}}})
	if len(got) != 1 || got[0].series != `{__name__="m"}` {
		t.Errorf("tag __name__: got %+v", got)
	}
	for _, c := range []struct{ m, f, want string }{
		{"cpu", "value", "cpu"},
		{"cpu", "usage", "cpu_usage"},
		{"a:b", "c", "a:b_c"},
		{"cpu.load", "value", "cpu_load"},
		{"m-x", "é", "m_x__"},
		{"1m", "value", "_m"},
		{"", "value", "_"},
	} {
		if got := promName(c.m, c.f); got != c.want {
			t.Errorf("promName(%q, %q) = %q, want %q", c.m, c.f, got, c.want)
		}
	}
}

// A label value of invalid UTF-8, which a remote-write receiver refuses
// (with its whole batch), is sent with U+FFFD in place of the bad bytes.
func TestPromLabelsValidUTF8(t *testing.T) {
	info := engine.SeriesInfo{Measurement: "m", Field: "value", Tags: []engine.Tag{{Key: "k", Value: "a\xffb"}}}
	got := oneSeriesRequest(t, info)
	if len(got) != 1 || got[0].series != `{__name__="m",k="a`+"\uFFFD"+`b"}` {
		t.Fatalf("got %+v", got)
	}
}

// Of consecutive samples of a series in one ms, one is sent: the later in
// time, and of equal times the later write, which is what the query API
// shows. Samples in other ms, and other series, are untouched.
func TestPromOneSamplePerMillisecond(t *testing.T) {
	const ms = int64(1e6)
	f := engine.Float
	var e promEncoder
	e.add([]engine.FeedSample{
		{ID: 1, Time: 10*ms + 200, Value: f(1)},
		{ID: 2, Time: 10*ms + 100, Value: f(100)},
		{ID: 1, Time: 10*ms + 700, Value: f(2)},     // later in the ms: replaces 1
		{ID: 1, Time: 10*ms + 500, Value: f(3)},     // earlier than 2: not sent
		{ID: 2, Time: 10*ms + 100, Value: f(101)},   // an overwrite: the later write
		{ID: 1, Time: 11 * ms, Value: f(4)},         // the next ms
		{ID: 1, Time: -ms + 1, Value: f(5)},         // floored to -1 ms: kept, in order
		{ID: 1, Time: -ms + 9, Value: f(6)},         // same ms: replaces 5
		{ID: 2, Time: 10*ms + 999_999, Value: f(7)}, // still ms 10: replaces 101
	})
	lines := encodeSamples(t, &e)
	want := []string{
		`{__name__="a"} 10 2`, `{__name__="a"} 11 4`, `{__name__="a"} -1 6`,
		`{__name__="b"} 10 7`,
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// Fields of one point share a line, but a field written twice in a row
// (an overwrite) starts a new line: a line may hold a field key once.
func TestInfluxFieldTwiceStartsLine(t *testing.T) {
	meta := map[uint64]*seriesMeta{
		1: {prefix: "m,h=a", field: "x"},
		2: {prefix: "m,h=a", field: "y"},
	}
	out := encodeInflux(nil, []engine.FeedSample{
		{ID: 1, Time: 5, Value: engine.Float(1)},
		{ID: 2, Time: 5, Value: engine.Int(2)},
		{ID: 1, Time: 5, Value: engine.Float(3)}, // x again
		{ID: 2, Time: 5, Value: engine.Int(4)},   // y again
		{ID: 2, Time: 5, Value: engine.Int(5)},   // y a third time
		{ID: 1, Time: 6, Value: engine.Float(6)},
	}, func(id uint64) *seriesMeta { return meta[id] })
	want := "m,h=a x=1,y=2i 5\nm,h=a x=3,y=4i 5\nm,h=a y=5i 5\nm,h=a x=6 6\n"
	if string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
}

// Tag keys that sanitize to one label name give one label, their values
// joined by ';' in key order, and a key that would be __name__ is left
// out: the label set the query API shows (server.promLabels).
func TestPromLabelsCollide(t *testing.T) {
	info := engine.SeriesInfo{Measurement: "m", Field: "v", Tags: []engine.Tag{
		{Key: "__name__", Value: "n"}, {Key: "a.b", Value: "x"}, {Key: "a_b", Value: "y"}, {Key: "aé", Value: "z"}, {Key: "c", Value: "w"},
	}}
	got := oneSeriesRequest(t, info)
	if want := `{__name__="m_v",a_="z",a_b="x;y",c="w"}`; len(got) != 1 || got[0].series != want {
		t.Fatalf("got %+v, want %s", got, want)
	}
}

// A sample in the ms of the series' last sample of the previous batch is
// not sent: the receiver holds a value for that ms and would refuse the
// whole batch for another one.
func TestPromSameMillisecondAcrossBatches(t *testing.T) {
	const ms = int64(1e6)
	var e promEncoder
	batch := func(samples ...engine.FeedSample) []string {
		t.Helper()
		e.add(samples)
		return encodeSamples(t, &e)
	}
	if got := batch(engine.FeedSample{ID: 1, Time: 10*ms + 200, Value: engine.Float(1)}); len(got) != 1 {
		t.Fatalf("first batch %q", got)
	}
	got := batch(
		engine.FeedSample{ID: 1, Time: 10*ms + 700, Value: engine.Float(2)}, // ms 10 again: not sent
		engine.FeedSample{ID: 2, Time: 10*ms + 700, Value: engine.Float(3)}, // another series
		engine.FeedSample{ID: 1, Time: 11 * ms, Value: engine.Float(4)},
	)
	want := []string{`{__name__="b"} 10 3`, `{__name__="a"} 11 4`}
	if !slices.Equal(got, want) {
		t.Fatalf("second batch %q, want %q", got, want)
	}
}

// oneSeriesRequest encodes one sample of the series info and decodes the
// request.
func oneSeriesRequest(t *testing.T, info engine.SeriesInfo) []got {
	t.Helper()
	var e promEncoder
	e.add([]engine.FeedSample{{ID: 0, Time: 5e6, Value: engine.Float(1)}})
	meta := &seriesMeta{kind: engine.KindFloat, labels: promLabels(info)}
	req, _ := e.encode(nil, func(uint64) *seriesMeta { return meta })
	out, err := decodeWriteRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// encodeSamples encodes the batch of e, whose series 1 and 2 are "a" and
// "b" (field value), and returns its samples as "series ms value", in the
// request's order.
func encodeSamples(t *testing.T, e *promEncoder) []string {
	t.Helper()
	meta := map[uint64]*seriesMeta{
		1: {labels: promLabels(engine.SeriesInfo{Measurement: "a", Field: "value"})},
		2: {labels: promLabels(engine.SeriesInfo{Measurement: "b", Field: "value"})},
	}
	req, skipped := e.encode(nil, func(id uint64) *seriesMeta { return meta[id] })
	if skipped != 0 {
		t.Fatalf("skipped %d", skipped)
	}
	got, err := decodeWriteRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, s := range got {
		lines = append(lines, s.series+" "+itoa(s.time)+" "+s.value)
	}
	return lines
}
