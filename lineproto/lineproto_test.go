package lineproto_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/lineproto"
)

var now0 = time.Unix(1_700_000_000, 123_456_789)

func fixedNow() time.Time { return now0 }

func pt(m string, ts int64, tags []point.Tag, fields ...point.Field) point.Point {
	return point.Point{Measurement: m, Tags: tags, Fields: fields, Time: ts}
}

func tg(kv ...string) []point.Tag {
	var tags []point.Tag
	for i := 0; i+1 < len(kv); i += 2 {
		tags = append(tags, point.Tag{Key: kv[i], Value: kv[i+1]})
	}
	return tags
}

func fl(k string, v point.Value) point.Field { return point.Field{Key: k, Value: v} }

func samePoint(a, b point.Point) bool {
	if a.Measurement != b.Measurement || a.Time != b.Time ||
		len(a.Tags) != len(b.Tags) || len(a.Fields) != len(b.Fields) {
		return false
	}
	for i := range a.Tags {
		if a.Tags[i] != b.Tags[i] {
			return false
		}
	}
	for i := range a.Fields {
		if a.Fields[i].Key != b.Fields[i].Key || !a.Fields[i].Value.Equal(b.Fields[i].Value) {
			return false
		}
	}
	return true
}

func showPoint(p point.Point) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q", p.Measurement)
	for _, t := range p.Tags {
		fmt.Fprintf(&b, " %q=%q", t.Key, t.Value)
	}
	for _, f := range p.Fields {
		fmt.Fprintf(&b, " %q=%v(%q)", f.Key, f.Value.Kind(), f.Value.String())
	}
	fmt.Fprintf(&b, " @%d", p.Time)
	return b.String()
}

// short quotes s for a test message, cut to a readable length.
func short(s string) string {
	if len(s) > 80 {
		return fmt.Sprintf("%q...(%d bytes)", s[:80], len(s))
	}
	return fmt.Sprintf("%q", s)
}

func firstErrors(rej []*lineproto.LineError) []*lineproto.LineError { return rej[:min(len(rej), 5)] }

func ingest(t testing.TB, db lineproto.DB, in string, opts lineproto.Options) lineproto.Result {
	t.Helper()
	if opts.Now == nil {
		opts.Now = fixedNow
	}
	res, err := lineproto.Write(context.Background(), db, strings.NewReader(in), opts)
	if err != nil {
		t.Fatalf("Write(%s): %v", short(in), err)
	}
	if res.Lines != res.Points+res.RejectedCount {
		t.Fatalf("Write(%s): Lines %d != Points %d + RejectedCount %d", short(in), res.Lines, res.Points, res.RejectedCount)
	}
	maxRej := opts.MaxRejected
	if maxRej == 0 {
		maxRej = lineproto.DefaultMaxRejected
	}
	if len(res.Rejected) != min(res.RejectedCount, maxRej) {
		t.Fatalf("Write(%s): %d in Rejected of %d rejected, with MaxRejected %d", short(in), len(res.Rejected), res.RejectedCount, maxRej)
	}
	if m, ok := db.(*memDB); ok && m.invalid > 0 {
		t.Fatalf("Write(%s) handed the DB %d points that fail point.Validate", short(in), m.invalid)
	}
	return res
}

func TestValidLines(t *testing.T) {
	f := func(in string, want ...point.Point) {
		t.Helper()
		db := newMemDB()
		res := ingest(t, db, in, lineproto.Options{})
		if len(res.Rejected) > 0 {
			t.Fatalf("%s: rejected %v", short(in), firstErrors(res.Rejected))
		}
		if res.Lines != len(want) || res.Points != len(want) {
			t.Fatalf("%q: Lines %d, Points %d, want %d", in, res.Lines, res.Points, len(want))
		}
		for i := range want {
			if !samePoint(db.points[i], want[i]) {
				t.Fatalf("%q: point %d\n got %s\nwant %s", in, i, showPoint(db.points[i]), showPoint(want[i]))
			}
		}
	}
	F, I, U, B, S := point.Float, point.Int, point.Uint, point.Bool, point.String
	now := now0.UnixNano()

	// Every kind.
	f("cpu v=1.5 1", pt("cpu", 1, nil, fl("v", F(1.5))))
	f("cpu v=1 1", pt("cpu", 1, nil, fl("v", F(1))))
	f("cpu v=-1 1", pt("cpu", 1, nil, fl("v", F(-1))))
	f("cpu v=1. 1", pt("cpu", 1, nil, fl("v", F(1))))
	f("cpu v=.5 1", pt("cpu", 1, nil, fl("v", F(0.5))))
	f("cpu v=1e3,w=-1.5E-3,x=2e+2 1", pt("cpu", 1, nil, fl("v", F(1000)), fl("w", F(-0.0015)), fl("x", F(200))))
	f("cpu v=1.7976931348623157e308 1", pt("cpu", 1, nil, fl("v", F(math.MaxFloat64))))
	f("cpu v=42i 1", pt("cpu", 1, nil, fl("v", I(42))))
	f("cpu v=-42i 1", pt("cpu", 1, nil, fl("v", I(-42))))
	f("cpu v=-9223372036854775808i,w=9223372036854775807i 1",
		pt("cpu", 1, nil, fl("v", I(math.MinInt64)), fl("w", I(math.MaxInt64))))
	f("cpu v=0u,w=18446744073709551615u 1", pt("cpu", 1, nil, fl("v", U(0)), fl("w", U(math.MaxUint64))))
	f("cpu a=t,b=T,c=true,d=True,e=TRUE 1",
		pt("cpu", 1, nil, fl("a", B(true)), fl("b", B(true)), fl("c", B(true)), fl("d", B(true)), fl("e", B(true))))
	f("cpu a=f,b=F,c=false,d=False,e=FALSE 1",
		pt("cpu", 1, nil, fl("a", B(false)), fl("b", B(false)), fl("c", B(false)), fl("d", B(false)), fl("e", B(false))))
	f(`cpu s="hello world" 1`, pt("cpu", 1, nil, fl("s", S("hello world"))))
	f(`cpu s="" 1`, pt("cpu", 1, nil, fl("s", S(""))))
	f(`cpu a=1,b=2i,c=3u,d=t,e="x" 1`,
		pt("cpu", 1, nil, fl("a", F(1)), fl("b", I(2)), fl("c", U(3)), fl("d", B(true)), fl("e", S("x"))))

	// Tags, in the order written.
	f("cpu,host=a,dc=b v=1 1", pt("cpu", 1, tg("host", "a", "dc", "b"), fl("v", F(1))))

	// Duplicate field keys: the last value wins, in the first one's place.
	f("cpu v=1,w=2,v=3i 1", pt("cpu", 1, nil, fl("v", I(3)), fl("w", F(2))))

	// Escapes in names.
	f(`my\ cpu\,x v=1 1`, pt("my cpu,x", 1, nil, fl("v", F(1))))
	f(`cpu,ta\ g\=k\,=va\ l\=v\,x v=1 1`, pt("cpu", 1, tg("ta g=k,", "va l=v,x"), fl("v", F(1))))
	f(`cpu f\ i\=e\,ld=1 1`, pt("cpu", 1, nil, fl("f i=e,ld", F(1))))
	f(`a\b,k\q=v\w f\x=1 1`, pt(`a\b`, 1, tg(`k\q`, `v\w`), fl(`f\x`, F(1))))
	f(`a\\ b v=1 1`, pt(`a\ b`, 1, nil, fl("v", F(1))))

	// Escapes in strings, and quotes that open no string.
	f(`cpu s="a\"b\\c" 1`, pt("cpu", 1, nil, fl("s", S(`a"b\c`))))
	f(`cpu s="a\qb\" 1"`, pt("cpu", now, nil, fl("s", S(`a\qb" 1`))))
	f(`cpu s="tab\there" 1`, pt("cpu", 1, nil, fl("s", S("tab\there"))))
	f(`cpu s="a,b=c d" 1`, pt("cpu", 1, nil, fl("s", S("a,b=c d"))))
	f(`m"x,t="y a"b=1,s="z" 1`, pt(`m"x`, 1, tg("t", `"y`), fl(`a"b`, F(1)), fl("s", S("z"))))
	f("\"m v=1 1\ncpu v=2 2", pt(`"m`, 1, nil, fl("v", F(1))), pt("cpu", 2, nil, fl("v", F(2))))

	// Strings with raw newlines: one entry.
	f("cpu s=\"line1\nline2\" 1\ncpu v=2 2",
		pt("cpu", 1, nil, fl("s", S("line1\nline2"))), pt("cpu", 2, nil, fl("v", F(2))))
	f("cpu s=\"a\n\n\nb\",t=\"\nc\" 1", pt("cpu", 1, nil, fl("s", S("a\n\n\nb")), fl("t", S("\nc"))))
	f("cpu s=\"a\\\nb\" 1", pt("cpu", 1, nil, fl("s", S("a\\\nb"))))
	f("cpu s=\"a\\\\\nb\" 1", pt("cpu", 1, nil, fl("s", S("a\\\nb"))))
	f("cpu s=\"a\r\nb\" 1\r\n", pt("cpu", 1, nil, fl("s", S("a\r\nb"))))
	f("cpu s=\"# not a comment\n#\" 1", pt("cpu", 1, nil, fl("s", S("# not a comment\n#"))))
	f("cpu s=\"x\\\"\ny\" 1", pt("cpu", 1, nil, fl("s", S("x\"\ny"))))

	// Unicode.
	f("温度,地点=東京 値=21.5,説明=\"晴れ ☀\" 1", pt("温度", 1, tg("地点", "東京"), fl("値", F(21.5)), fl("説明", S("晴れ ☀"))))
	f("🌡,🔑=🗝 ✓=1i 1", pt("🌡", 1, tg("🔑", "🗝"), fl("✓", I(1))))

	// Timestamps and Now.
	f("cpu v=1 -5", pt("cpu", -5, nil, fl("v", F(1))))
	f("cpu v=1 9223372036854775807", pt("cpu", math.MaxInt64, nil, fl("v", F(1))))
	f("cpu v=1 -9223372036854775808", pt("cpu", math.MinInt64, nil, fl("v", F(1))))
	f("cpu v=1 0\ncpu v=1 -0\ncpu v=1 007", pt("cpu", 0, nil, fl("v", F(1))), pt("cpu", 0, nil, fl("v", F(1))),
		pt("cpu", 7, nil, fl("v", F(1))))
	f("cpu v=1", pt("cpu", now, nil, fl("v", F(1))))
	f("cpu v=1\ncpu v=2 7\ncpu v=3", pt("cpu", now, nil, fl("v", F(1))), pt("cpu", 7, nil, fl("v", F(2))),
		pt("cpu", now, nil, fl("v", F(3))))

	// Line endings, blanks, comments.
	f("cpu v=1 1\r\ncpu v=2 2\r\n", pt("cpu", 1, nil, fl("v", F(1))), pt("cpu", 2, nil, fl("v", F(2))))
	f("cpu v=1 1   \ncpu v=2   \r\n", pt("cpu", 1, nil, fl("v", F(1))), pt("cpu", now, nil, fl("v", F(2))))
	f("cpu v=1 1\r", pt("cpu", 1, nil, fl("v", F(1))))
	f("cpu v=1\r", pt("cpu", now, nil, fl("v", F(1))))
	f("  cpu v=1 1", pt("cpu", 1, nil, fl("v", F(1))))
	f(`cpu s="x"   `, pt("cpu", now, nil, fl("s", S("x"))))
	f("# comment\n\n   \n  \r\n\r\n#cpu v=1 1\n  # \"quoted\ncpu v=1 1\n# last", pt("cpu", 1, nil, fl("v", F(1))))
	f("# tab-free comment with \xff bytes and \"quotes\r\ncpu v=1 1\n#\r", pt("cpu", 1, nil, fl("v", F(1))))
	// Tabs are ordinary bytes in values and strings.
	f("cpu v=t,s=\"a\tb\" 1", pt("cpu", 1, nil, fl("v", B(true)), fl("s", S("a\tb"))))
	// A carriage return inside a string is part of it.
	f("cpu s=\"a\rb\" 1\ncpu s=\"\r\" 2", pt("cpu", 1, nil, fl("s", S("a\rb"))), pt("cpu", 2, nil, fl("s", S("\r"))))
	// Floats as strconv reads them, hexadecimal included.
	f("cpu v=0x1p-2,w=-0x1.8p1 1", pt("cpu", 1, nil, fl("v", F(0.25)), fl("w", F(-3))))
	f("")
	f("\n\n")
	f("# only a comment")
}

// TestInvalidLines checks which lines are rejected, with their numbers, and
// that every other line lands. want lists "N reason" for each rejected line,
// where reason is a substring of the error.
func TestInvalidLines(t *testing.T) {
	f := func(in string, opts lineproto.Options, points int, want ...string) {
		t.Helper()
		db := newMemDB()
		res := ingest(t, db, in, opts)
		if res.Points != points || len(db.points) != points {
			t.Errorf("%s: Points %d, stored %d, want %d", short(in), res.Points, len(db.points), points)
		}
		if len(res.Rejected) != len(want) {
			t.Fatalf("%s: %d rejected %v, want %q", short(in), len(res.Rejected), firstErrors(res.Rejected), want)
		}
		for i, w := range want {
			line, reason, _ := strings.Cut(w, " ")
			le := res.Rejected[i]
			if fmt.Sprint(le.Line) != line || !strings.Contains(le.Error(), reason) {
				t.Errorf("%s: rejected[%d] = %q, want line %s and %q", short(in), i, le, line, reason)
			}
			if !strings.HasPrefix(le.Error(), "line "+line+": ") {
				t.Errorf("%s: %q does not start with its line", short(in), le)
			}
			if !errors.Is(le, base.ErrInvalid) && !errors.Is(le, base.ErrFieldTypeConflict) {
				t.Errorf("%s: %q matches neither ErrInvalid nor ErrFieldTypeConflict", short(in), le)
			}
		}
	}
	var o lineproto.Options
	good := "cpu v=1 1\n"

	// Bad syntax and missing parts, each between good lines.
	for _, c := range []struct{ line, reason string }{
		{"cpu", "column 4"},
		{"cpu ", "column 5"},
		{"cpu v", "want '='"},
		{"cpu v=", "unrecognized type"},
		{"cpu v=,w=1", "unrecognized type"},
		{"cpu,t v=1", "expected '='"},
		{"cpu,t= v=1", "expected tag value"},
		{"cpu, v=1", "expected tag key"},
		{"cpu,t=a=b v=1", ""},
		{",t=a v=1", "measurement"},
		{" ,t=a v=1", "column 2"},
		{"cpu =1", "field key"},
		{"cpu v=1,,w=2", "field key"},
		{"cpu v=1 1 2", "after timestamp"},
		{"cpu v=1 12a", "invalid timestamp"},
		{"cpu v=1 -", "invalid timestamp"},
		{"cpu v=1 --1", "invalid timestamp"},
		{"cpu v=1 1-1", "invalid timestamp"},
		{"cpu v=1 99999999999999999999", "out of range"},
		{"cpu v=abc", "unrecognized type"},
		{"cpu v=1x", "invalid float"},
		{"cpu v=1__0", "invalid float"},
		{"cpu v=0x1", "invalid float"},
		{"cpu v=-inf", "not a number"},
		{"cpu v=0x1p2000", "out of range"},
		// The decoder's blanks are spaces only, and its comment lines are
		// printable.
		{"\tcpu v=1 1", "column 1: invalid character '\\t' found at start of measurement name"},
		{"\t", "column 1"},
		{" \t ", "column 2"},
		{"cpu v=1 1\t", "invalid timestamp"},
		{"cpu v=1\t", "invalid float"},
		{"cpu\tv=1", ""},
		{"cpu v=1\t1", "invalid float"},
		{"# bell \a", "column 8: invalid character '\\a' in comment line"},
		{"  #\t", "column 4: invalid character '\\t' in comment line"},
		{"#\x7f", "column 2"},
		// A carriage return ends a line only right before the newline.
		{"cpu v=1 1\r ", "column 10: carriage return not followed by a newline"},
		{"cpu v=1\r\r", "column 8: carriage return"},
		{"\r\r", "column 1: carriage return"},
		{" \rcpu v=1 1", "column 2: carriage return"},
		{"cpu\rv=1 1", "column 4: carriage return"},
		{"#comment\r ", "column 9: invalid character '\\r' in comment line"},
		{"cpu v=1 1\rcpu v=2 2", "carriage return"},
		{"cpu v=\"s\"\rx,s=\"a", "carriage return"},
		{"cpu v=1.5i", "invalid integer"},
		{"cpu v=-1u", "invalid unsigned"},
		{"cpu v=tru", "invalid boolean"},
		{`cpu s="x"y`, "unexpected character"},
		{"cpu\x01 v=1", ""},
		{"cpu\xff v=1", "utf-8"},
		{"cpu v=1\x00", "invalid float"},
		{"\x00", ""},
		{"cpu,a=1,a=2 v=1", "duplicate tag key"},
		// NaN-like and out of range values.
		{"cpu v=NaN", "unrecognized type"},
		{"cpu v=nan", ""},
		{"cpu v=Inf", ""},
		{"cpu v=-Inf", "not a number"},
		{"cpu v=-NaN", "invalid float"},
		{"cpu v=1e400", "out of range"},
		{"cpu v=9223372036854775808i", "out of range"},
		{"cpu v=-9223372036854775809i", "out of range"},
		{"cpu v=18446744073709551616u", "out of range"},
		{"cpu v=1 9223372036854775808", "out of range"},
		{"cpu v=1 -9223372036854775809", "out of range"},
	} {
		f(good+c.line+"\n"+good+"\n# end\n", o, 2, "2 "+c.reason)
	}

	// Several bad lines among good ones, with blank and comment lines counted
	// in the numbering.
	f("# header\ncpu v=1 1\n\ncpu v=\ncpu v=2 2\n  # x\nbad\ncpu v=3 3\n", o, 3,
		"4 unrecognized type", "7 expected tag key or field")
	// A bad line that comes before a quote ends at its newline.
	f(",t=a s=\"x\ncpu v=1 1\ncpu v=2 2\n", o, 2, "1 measurement")
	f("cpu v=\"x\ny\" w=x\"\ncpu v=2 2\n", o, 1, "1 invalid timestamp")
	f("cpu v=+1,s=\"x\ncpu v=2 2\n", o, 1, "1 unrecognized type")
	f("cpu\xff s=\"x\ncpu v=2 2\n", o, 1, "1 utf-8")
	// A string that is never closed takes the rest of the input.
	f("cpu v=1 1\ncpu s=\"x\ncpu v=2 2\ncpu v=3 3\n", o, 1, "2 closing quote")
	// Line numbers after multi-line strings.
	f("a s=\"x\ny\" 1\nb v=1 2\n\nc v=bad\nd s=\"\n\n\" 3\ne v=\n", o, 3, "5 unrecognized type", "9 unrecognized type")
	f("cpu v=1 1\ncpu v=\"unterminated", o, 1, "2 closing quote")
	// CRLF and a column that counts the dropped leading blanks.
	f("cpu v=1 1\r\n   cpu,t= v=1\r\n", o, 1, "2 column 10: expected tag value")

	// Timestamps out of range after scaling.
	for _, c := range []struct {
		p   lineproto.Precision
		max string
	}{
		{lineproto.Microsecond, "9223372036854775"},
		{lineproto.Millisecond, "9223372036854"},
		{lineproto.Second, "9223372036"},
	} {
		o := lineproto.Options{Precision: c.p}
		f("cpu v=1 "+c.max+"\ncpu v=1 "+c.max+"9\ncpu v=1 -"+c.max+"\ncpu v=1 -"+c.max+"9\n", o, 2,
			"2 out of range", "4 out of range")
	}

	// Too long lines are rejected alone; the next line is fine.
	o = lineproto.Options{MaxLineBytes: 20}
	f("cpu v=1 1\ncpu v=1,w=2,x=3,y=4 1\ncpu v=2 2\n", o, 2, "2 line too long")
	f("cpu v=1 1\ncpu v=1,w=2,x=3,y=4 1", o, 1, "2 line too long")
	f("cpu,t=a\"b v=1,w=2,x=3 1\ncpu v=2 2\n", o, 1, "1 line too long")
	f("# a comment longer than twenty bytes\n"+strings.Repeat(" ", 30)+"\ncpu v=2 2\n", o, 1)
	f("cpu v=1 1 \r\ncpu v=2 2", o, 2) // blanks count towards the limit
	f("cpu v=1 1           \r\ncpu v=2 2", o, 1, "1 line too long")
	// A string that runs past the limit: reading resumes after the line
	// where the limit is crossed.
	f("cpu s=\"aaaa\nbbbb\ncccccccccccccccccc\ncpu v=1 1\nx\" 1\n", o, 1, "1 line too long", "5 ")
	// Much longer than the read buffer.
	f("cpu v=1 1\n"+strings.Repeat("x", 200_000)+"\ncpu v=2 2\n", lineproto.Options{}, 2, "2 line too long")
	f("cpu v=1 1\n"+strings.Repeat("x", 200_000)+"\"\ncpu v=2 2\n", lineproto.Options{}, 2, "2 line too long")
	f("cpu s=\""+strings.Repeat("# x\n", 30_000)+"\"\ncpu v=2 2\n", lineproto.Options{}, 1, "1 line too long",
		"30001 expected tag key")
	f("cpu s=\""+strings.Repeat("é", 100_000)+"\" 1\ncpu v=2 2\n", lineproto.Options{MaxLineBytes: 300_000}, 2)
}

// TestKindConflicts checks that a line the DB refuses is rejected alone and
// every good line of its batch lands.
func TestKindConflicts(t *testing.T) {
	f := func(in string, batch int, points int, want ...int) {
		t.Helper()
		db := newMemDB()
		res := ingest(t, db, in, lineproto.Options{BatchSize: batch})
		if res.Points != points || len(db.points) != points {
			t.Errorf("%s: Points %d, stored %d, want %d", short(in), res.Points, len(db.points), points)
		}
		var got []int
		for _, le := range res.Rejected {
			got = append(got, le.Line)
			if !errors.Is(le, base.ErrFieldTypeConflict) && !errors.Is(le, base.ErrInvalid) {
				t.Errorf("%q: %v matches neither ErrFieldTypeConflict nor ErrInvalid", in, le)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%q: rejected lines %v, want %v", in, got, want)
		}
	}
	// With an earlier line of the same batch.
	f("m v=1 1\nm v=2i 2\nm v=3 3\n", 10, 2, 2)
	// With an earlier batch.
	f("m v=1 1\nm v=2i 2\nm v=3 3\n", 1, 2, 2)
	f("m v=1 1\nm v=2 2\nm v=3i 3\nm v=4 4\n", 2, 3, 3)
	// Tags in another order are the same series; other tags another one.
	f("m,a=1,b=2 v=1 1\nm,b=2,a=1 v=t 2\nm,a=1 v=t 3\n", 10, 2, 2)
	// Conflicts mixed with parse errors stay in line order.
	f("m v=1 1\nm v=2i 2\nm v= 3\nm v=\"s\" 4\nbad 5\nm v=6 6\n", 10, 2, 2, 3, 4, 5)
	// The first line fixes the kind even when it comes late in the batch.
	f("m w=1 1\nm v=1u 2\nm v=1i 3\nm v=2u 4\n", 10, 3, 3)
	// Duplicate fields: only the last value's kind counts.
	f("m v=1 1\nm v=1i,v=2 2\nm v=1,v=2i 3\n", 10, 2, 3)

	// Against stored data: a later Write call sees the kinds of the first.
	db := newMemDB()
	ingest(t, db, "m v=1i 1\n", lineproto.Options{})
	res := ingest(t, db, "m v=2 2\nm v=3i 3\n", lineproto.Options{})
	if res.Points != 1 || len(res.Rejected) != 1 || res.Rejected[0].Line != 1 {
		t.Errorf("against stored data: %+v", res)
	}
}

// TestManyConflicts checks that a batch full of refused points costs a
// bounded amount of work in the DB, and all its good points land.
func TestManyConflicts(t *testing.T) {
	const n = 2000
	var in strings.Builder
	for i := range n {
		if i%2 == 0 {
			fmt.Fprintf(&in, "m v=%d %d\n", i, i)
		} else {
			fmt.Fprintf(&in, "m v=%di %d\n", i, i)
		}
	}
	db := newMemDB()
	res := ingest(t, db, in.String(), lineproto.Options{BatchSize: n, MaxRejected: n})
	if res.Points != n/2 || len(res.Rejected) != n/2 {
		t.Fatalf("Points %d Rejected %d, want %d each", res.Points, len(res.Rejected), n/2)
	}
	for i, le := range res.Rejected {
		if le.Line != 2*i+2 {
			t.Fatalf("rejected[%d] is line %d, want %d", i, le.Line, 2*i+2)
		}
	}
	for i, p := range db.points {
		if p.Time != int64(2*i) {
			t.Fatalf("point %d has time %d, want %d", i, p.Time, 2*i)
		}
	}
	// Retrying the whole batch after each refusal would look at ~n*n/8 points.
	if db.examined > 12*n {
		t.Errorf("the DB examined %d points for %d lines", db.examined, n)
	}
}

func TestPrecision(t *testing.T) {
	f := func(p lineproto.Precision, ts string, want int64) {
		t.Helper()
		db := newMemDB()
		ingest(t, db, "cpu v=1 "+ts, lineproto.Options{Precision: p})
		if len(db.points) != 1 || db.points[0].Time != want {
			t.Fatalf("%v %s: got %v, want time %d", p, ts, db.points, want)
		}
	}
	f(lineproto.Nanosecond, "1", 1)
	f(lineproto.Microsecond, "1", 1e3)
	f(lineproto.Millisecond, "1", 1e6)
	f(lineproto.Second, "1", 1e9)
	f(lineproto.Second, "-1", -1e9)
	f(lineproto.Second, "1700000000", 1_700_000_000e9)
	f(lineproto.Second, "9223372036", 9223372036e9)
	f(lineproto.Millisecond, "-9223372036854", -9223372036854e6)

	for _, c := range []struct {
		s string
		p lineproto.Precision
	}{{"ns", lineproto.Nanosecond}, {"us", lineproto.Microsecond}, {"µs", lineproto.Microsecond},
		{"ms", lineproto.Millisecond}, {"s", lineproto.Second}} {
		p, err := lineproto.ParsePrecision(c.s)
		if err != nil || p != c.p {
			t.Errorf("ParsePrecision(%q) = %v, %v; want %v", c.s, p, err, c.p)
		}
		if c.s != "µs" && p.String() != c.s {
			t.Errorf("%v.String() = %q", p, p.String())
		}
	}
	for _, s := range []string{"", "h", "m", "sec", "NS"} {
		if _, err := lineproto.ParsePrecision(s); !errors.Is(err, base.ErrInvalid) {
			t.Errorf("ParsePrecision(%q) = %v, want ErrInvalid", s, err)
		}
	}
}

// TestNow checks that lines without a timestamp take Options.Now, read once
// per batch and truncated to the precision.
func TestNow(t *testing.T) {
	calls := 0
	clock := func() time.Time {
		calls++
		return time.Unix(int64(calls)*100, 500_000_000)
	}
	db := newMemDB()
	ingest(t, db, "m v=1\nm v=2\nm v=3\nm v=4 7\nm v=5 8\nm v=6\n", lineproto.Options{
		BatchSize: 2, Precision: lineproto.Second, Now: clock,
	})
	// Batches: {1,2} {3,4} {5,6}.
	want := []int64{100e9, 100e9, 200e9, 7e9, 8e9, 300e9}
	if calls != 3 {
		t.Errorf("Now called %d times, want 3", calls)
	}
	for i, p := range db.points {
		if p.Time != want[i] {
			t.Errorf("point %d at %d, want %d", i, p.Time, want[i])
		}
	}

	// A batch where every line has a timestamp does not read the clock.
	calls = 0
	ingest(t, newMemDB(), "m v=1 1\nm v=2 2\n", lineproto.Options{Now: clock})
	if calls != 0 {
		t.Errorf("Now called %d times for lines with timestamps", calls)
	}

	// Truncation to the precision floors negative times too.
	for _, c := range []struct {
		p    lineproto.Precision
		now  time.Time
		want int64
	}{
		{lineproto.Nanosecond, time.Unix(0, 1_234_567_891), 1_234_567_891},
		{lineproto.Microsecond, time.Unix(0, 1_234_567_891), 1_234_567_000},
		{lineproto.Millisecond, time.Unix(0, 1_234_567_891), 1_234_000_000},
		{lineproto.Second, time.Unix(0, 1_234_567_891), 1_000_000_000},
		{lineproto.Second, time.Unix(0, -1), -1_000_000_000},
	} {
		db := newMemDB()
		ingest(t, db, "m v=1", lineproto.Options{Precision: c.p, Now: func() time.Time { return c.now }})
		if db.points[0].Time != c.want {
			t.Errorf("%v at %v: time %d, want %d", c.p, c.now, db.points[0].Time, c.want)
		}
	}
}

// lineReader produces n lines of line protocol without holding them all.
type lineReader struct {
	i, n int
	buf  []byte
}

func (r *lineReader) Read(p []byte) (int, error) {
	for len(r.buf) < len(p) && r.i < r.n {
		r.buf = fmt.Appendf(r.buf, "sensor,device_id=dev-%04d v=%d.5 %d\n", r.i%1000, r.i, r.i)
		r.i++
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.buf)
	r.buf = r.buf[:copy(r.buf, r.buf[n:])]
	return n, nil
}

func TestStreaming(t *testing.T) {
	const n = 50_000
	db := &countDB{}
	res, err := lineproto.Write(context.Background(), db, &lineReader{n: n}, lineproto.Options{BatchSize: 1000})
	if err != nil || res.Lines != n || res.Points != n || len(res.Rejected) != 0 {
		t.Fatalf("Write: %+v, %v", res, err)
	}
	if db.calls != n/1000 || db.max != 1000 {
		t.Errorf("%d calls of at most %d points, want %d of 1000", db.calls, db.max, n/1000)
	}

	// Memory is bounded by the batch, not the input: a 32 MiB line without
	// a newline costs far less than its size.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	in := io.MultiReader(strings.NewReader("cpu v=1 1\ncpu,"), &repeatReader{b: 'x', n: 32 << 20},
		strings.NewReader("\ncpu v=2 2\n"))
	res, err = lineproto.Write(context.Background(), db, in, lineproto.Options{})
	runtime.ReadMemStats(&after)
	if err != nil || res.Points != 2 || len(res.Rejected) != 1 || res.Rejected[0].Line != 2 {
		t.Fatalf("Write: %+v, %v", res, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("allocated %d bytes to reject a 32 MiB line", alloc)
	}
}

type countDB struct{ calls, max, n int }

func (db *countDB) Write(points []point.Point) error {
	db.calls++
	db.max = max(db.max, len(points))
	db.n += len(points)
	return nil
}

type repeatReader struct {
	b byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(len(p), r.n)]
	for i := range p {
		p[i] = r.b
	}
	r.n -= len(p)
	return len(p), nil
}

// TestFailures checks the errors Write returns.
func TestFailures(t *testing.T) {
	ctx := context.Background()
	in := "m v=1 1\nm v=2 2\nm v=3 3\nm v=4 4\nm v=5 5\n"

	// A DB failure ends the ingest; earlier batches stay written.
	diskFull := errors.New("disk full")
	db := newMemDB()
	db.failOn, db.failErr = 2, diskFull
	res, err := lineproto.Write(ctx, db, strings.NewReader(in), lineproto.Options{BatchSize: 2})
	if !errors.Is(err, diskFull) || res.Points != 2 || len(db.points) != 2 {
		t.Errorf("DB failure: %+v, %v", res, err)
	}
	// A PointError that is not about the point is a failure too.
	db = newMemDB()
	db.failOn, db.failErr = 1, &base.PointError{Index: 0, Err: base.ErrClosed}
	if _, err := lineproto.Write(ctx, db, strings.NewReader(in), lineproto.Options{}); !errors.Is(err, base.ErrClosed) {
		t.Errorf("PointError(ErrClosed): %v", err)
	}

	// A read error: what was read completely is written, then the error.
	bad := errors.New("bad disk")
	db = newMemDB()
	r := io.MultiReader(strings.NewReader("m v=1 1\nm v=2 2\nm v="), iotestErr{bad})
	res, err = lineproto.Write(ctx, db, r, lineproto.Options{})
	if !errors.Is(err, bad) || res.Points != 2 || res.Lines != 2 {
		t.Errorf("read error: %+v, %v", res, err)
	}

	// Cancellation.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := lineproto.Write(cctx, newMemDB(), strings.NewReader(in), lineproto.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	cctx, cancel = context.WithCancel(ctx)
	defer cancel()
	db = newMemDB()
	db.onWrite = func(int) { cancel() }
	res, err = lineproto.Write(cctx, db, &lineReader{n: 100_000}, lineproto.Options{BatchSize: 100})
	// Every entry read is written, and reading stopped soon: at most a
	// chunk of entries after the first batch.
	if !errors.Is(err, context.Canceled) || res.Points < 100 || res.Points > 100+4096 ||
		res.Lines != res.Points || len(db.points) != res.Points {
		t.Errorf("cancelled after a batch: %+v, stored %d, %v", res, len(db.points), err)
	}

	// Bad options.
	for _, o := range []lineproto.Options{{Precision: 9}, {BatchSize: -1}, {MaxLineBytes: -1}, {MaxRejected: -1}} {
		if _, err := lineproto.Write(ctx, newMemDB(), strings.NewReader(in), o); !errors.Is(err, base.ErrInvalid) {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

type iotestErr struct{ err error }

func (r iotestErr) Read([]byte) (int, error) { return 0, r.err }

func TestLineError(t *testing.T) {
	cause := errors.New("boom")
	le := &lineproto.LineError{Line: 7, Err: cause}
	if le.Error() != "line 7: boom" || !errors.Is(le, cause) {
		t.Errorf("LineError: %q", le)
	}
}

// TestSeriesCache checks lines whose series section was seen before, which
// the decoder parses with the section replaced by the cached result.
func TestSeriesCache(t *testing.T) {
	f := func(in string, points int, want ...string) {
		t.Helper()
		db := newMemDB()
		res := ingest(t, db, in, lineproto.Options{})
		var got []string
		bad := map[int]bool{}
		for _, le := range res.Rejected {
			got = append(got, le.Error())
			bad[le.Line] = true
		}
		if res.Points != points || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%q: %d points, rejected %q; want %d, %q", in, res.Points, got, points, want)
		}
		// Every stored point is what the decoder makes of its line alone.
		i := 0
		for n, line := range strings.Split(in, "\n") {
			if bad[n+1] {
				continue
			}
			one := newMemDB()
			ingest(t, one, line, lineproto.Options{})
			if len(one.points) != 1 || !samePoint(one.points[0], db.points[i]) {
				t.Fatalf("%q: line %d gave %s alone", in, n+1, showPoint(db.points[i]))
			}
			i++
		}
	}
	f("m,t=a v=1 1\nm,t=a v=2 2\n  m,t=a   v=3 3\nm,t=a v=abc 4\n  m,t=a v=5,w 5", 3,
		"line 4: column 9: field value has unrecognized type",
		`line 5: column 14: want '=' after field key "w", found ' '`)
	f("m,t=a v=1 1\n\tm,t=a v=2 2\nm,t=a v=3 3\t", 1,
		`line 2: column 1: invalid character '\t' found at start of measurement name`,
		`line 3: column 11: invalid timestamp ("3\t")`)
	f(`m\ x,t\ k=a\ b v=1 1`+"\n"+`m\ x,t\ k=a\ b w=2i 2`+"\n"+`m\ x,t\ k=a\\ b w=3i 3`, 3)
	f("m,b=2,a=1 v=1 1\nm,b=2,a=1 v=2 2\nm,a=1,b=2 v=3 3", 3)
	f("m,a=1,a=2 v=1 1\nm,a=1,a=2 v=2 2", 0, `line 1: duplicate tag key "a"`, `line 2: duplicate tag key "a"`)
	f("m,t=a v=1 1\nm,t=a\tv=2 2\nm,t=a,u=b v=3 3\nm,t=a, v=4 4\nm,t=a v=5 5", 3,
		"line 2: column 6: expected tag key or field but found '\\t' instead", "line 4: column 7: expected tag key after comma; got white space instead")
}

// TestMaxRejected checks that Result.Rejected keeps the rejections with the
// lowest line numbers, in order, whatever mix of parser rejections and DB
// refusals (which come back after the parser's rejections of later lines of
// the same batch) produced them, and counts the rest.
func TestMaxRejected(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := range 200 {
		var in strings.Builder
		n := 1 + r.IntN(300)
		for i := range n {
			switch r.IntN(6) {
			case 0:
				fmt.Fprintf(&in, "m v=%di %d\n", i, i) // a kind conflict once v is a float
			case 1:
				fmt.Fprintf(&in, "m v= %d\n", i) // a syntax error
			case 2:
				in.WriteString("# comment\n")
			default:
				fmt.Fprintf(&in, "m v=%d %d\n", i, i)
			}
		}
		batch := 1 + r.IntN(50)
		all := ingest(t, newMemDB(), in.String(), lineproto.Options{BatchSize: batch, MaxRejected: n + 1})
		for _, max := range []int{1, 2, 3, 7, 50} {
			res := ingest(t, newMemDB(), in.String(), lineproto.Options{BatchSize: batch, MaxRejected: max})
			if res.RejectedCount != all.RejectedCount || res.Points != all.Points {
				t.Fatalf("iter %d, max %d: %d rejected %d points, want %d and %d", iter, max, res.RejectedCount, res.Points, all.RejectedCount, all.Points)
			}
			want := all.Rejected[:min(max, len(all.Rejected))]
			if fmt.Sprint(res.Rejected) != fmt.Sprint(want) {
				t.Fatalf("iter %d, batch %d, max %d: kept\n%v\nwant\n%v", iter, batch, max, res.Rejected, want)
			}
		}
	}
}

// badLineReader produces n invalid lines of several kinds without holding
// them, and calls at(i) before producing line i.
type badLineReader struct {
	i, n int
	at   func(i int)
	buf  []byte
}

func (r *badLineReader) Read(p []byte) (int, error) {
	for len(r.buf) < len(p) && r.i < r.n {
		if r.at != nil {
			r.at(r.i)
		}
		// The names repeat, so that Write's bounded tables of names and
		// series stay the same size.
		switch r.i % 4 {
		case 0:
			r.buf = fmt.Appendf(r.buf, "sensor,device=d%d v=\n", r.i%10)
		case 1:
			r.buf = fmt.Appendf(r.buf, "sensor,device=d%d v=1 x%d\n", r.i%10, r.i)
		case 2:
			r.buf = fmt.Appendf(r.buf, "\tsensor v=%d\n", r.i)
		case 3:
			r.buf = fmt.Appendf(r.buf, "sensor,device=d%d,device=e v=1.5 %d\n", r.i%10, r.i)
		}
		r.i++
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.buf)
	r.buf = r.buf[:copy(r.buf, r.buf[n:])]
	return n, nil
}

// TestRejectedMemoryBounded checks that the memory Write holds does not grow
// with the number of rejected lines: the live heap after a GC is the same
// after 50,000 and after 250,000 invalid lines (keeping every LineError
// costs over 100 bytes each, some 25 MB here).
func TestRejectedMemoryBounded(t *testing.T) {
	const n, first = 250_000, 50_000
	heap := map[int]uint64{}
	measure := func(i int) {
		if i == first || i == n-1 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			heap[i] = ms.HeapAlloc
		}
	}
	res, err := lineproto.Write(context.Background(), &countDB{}, &badLineReader{n: n, at: measure}, lineproto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Lines != n || res.RejectedCount != n || res.Points != 0 || len(res.Rejected) != lineproto.DefaultMaxRejected {
		t.Fatalf("Lines %d, Points %d, Rejected %d of %d", res.Lines, res.Points, len(res.Rejected), res.RejectedCount)
	}
	for i, le := range res.Rejected {
		if le.Line != i+1 {
			t.Fatalf("Rejected[%d] is line %d", i, le.Line)
		}
	}
	if grow := int64(heap[n-1]) - int64(heap[first]); grow > 2<<20 {
		t.Errorf("live heap grew by %d bytes over %d rejected lines", grow, n-first)
	}
}

// syncDB is a DB that tells a channel about every accepted point, for tests
// that watch the writer from another goroutine.
type syncDB struct {
	mu     sync.Mutex
	points []point.Point
	wrote  chan int // gets each batch's size; buffered
}

func newSyncDB() *syncDB { return &syncDB{wrote: make(chan int, 1000)} }

func (db *syncDB) Write(points []point.Point) error {
	db.mu.Lock()
	for _, p := range points {
		p.Tags, p.Fields = slices.Clone(p.Tags), slices.Clone(p.Fields)
		db.points = append(db.points, p)
	}
	db.mu.Unlock()
	db.wrote <- len(points)
	return nil
}

// waitPoints waits until db holds n points, or fails the test after a
// generous deadline.
func (db *syncDB) waitPoints(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		db.mu.Lock()
		got := len(db.points)
		db.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-db.wrote:
		case <-deadline:
			t.Fatalf("%d of %d points written before the deadline", got, n)
		}
	}
}

// TestLinger checks that complete lines are written after Options.Linger
// when the input goes idle, without waiting for a full batch or the end of
// the input, and that an unfinished line is not.
func TestLinger(t *testing.T) {
	pr, pw := io.Pipe()
	db := newSyncDB()
	type result struct {
		res lineproto.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := lineproto.Write(context.Background(), db, pr, lineproto.Options{Linger: 50 * time.Millisecond})
		done <- result{res, err}
	}()
	// A pipe write returns once the reader has taken the bytes.
	if _, err := pw.Write([]byte("m v=1 1\nm v=2 2\nm v=3 3\nm v=4")); err != nil {
		t.Fatal(err)
	}
	db.waitPoints(t, 3) // the pipe stays open
	db.mu.Lock()
	n := len(db.points)
	db.mu.Unlock()
	if n != 3 {
		t.Fatalf("%d points written while the input is open, want 3", n)
	}
	// The input goes on after the idle time, the unfinished line included.
	if _, err := pw.Write([]byte(" 4\nm v=5 5\n")); err != nil {
		t.Fatal(err)
	}
	db.waitPoints(t, 5)
	pw.Close()
	r := <-done
	if r.err != nil || r.res.Lines != 5 || r.res.Points != 5 {
		t.Fatalf("Write: %+v, %v", r.res, r.err)
	}
	for i, p := range db.points {
		if p.Time != int64(i+1) || p.Fields[0].Value.Float() != float64(i+1) {
			t.Fatalf("point %d: %s", i, showPoint(p))
		}
	}

	// A multi-line string held open by an idle input is not cut.
	pr, pw = io.Pipe()
	db = newSyncDB()
	go func() {
		res, err := lineproto.Write(context.Background(), db, pr, lineproto.Options{Linger: time.Millisecond})
		done <- result{res, err}
	}()
	if _, err := pw.Write([]byte("m v=1 1\nm s=\"a\n")); err != nil {
		t.Fatal(err)
	}
	db.waitPoints(t, 1)
	if _, err := pw.Write([]byte("b\" 2\n")); err != nil {
		t.Fatal(err)
	}
	db.waitPoints(t, 2)
	pw.Close()
	if r := <-done; r.err != nil || r.res.Points != 2 || db.points[1].Fields[0].Value.Str() != "a\nb" {
		t.Fatalf("Write: %+v, %v, %s", r.res, r.err, showPoint(db.points[1]))
	}
}

// TestCancelIdle checks that cancelling the context stops Write while a Read
// blocks, after writing every complete line it read.
func TestCancelIdle(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	db := newSyncDB()
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		res lineproto.Result
		err error
	}
	done := make(chan result, 1)
	in := &enterReader{r: pr, entered: make(chan struct{}, 10)}
	go func() {
		// A linger far away: only the cancellation can write the lines.
		res, err := lineproto.Write(ctx, db, in, lineproto.Options{Linger: time.Hour})
		done <- result{res, err}
	}()
	if _, err := pw.Write([]byte("m v=1 1\nm v=2 2\r\nm s=\"x\ny\" 3\nm v=4 4\nm v=")); err != nil {
		t.Fatal(err)
	}
	// Once Write reads again, the bytes above are in its hands.
	<-in.entered
	<-in.entered
	select {
	case <-db.wrote:
		t.Fatal("wrote before the batch was full, the linger passed or the context was cancelled")
	default:
	}
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Write did not return after the cancellation")
	}
	if !errors.Is(r.err, context.Canceled) || r.res.Lines != 4 || r.res.Points != 4 || len(db.points) != 4 {
		t.Fatalf("Write: %+v, %d stored, %v", r.res, len(db.points), r.err)
	}
}

// enterReader tells a channel each time a Read starts.
type enterReader struct {
	r       io.Reader
	entered chan struct{}
}

func (r *enterReader) Read(p []byte) (int, error) {
	r.entered <- struct{}{}
	return r.r.Read(p)
}

// manyTags returns a line with n distinct tags, and key k again when dup.
func manyTags(n int, dup bool) string {
	var b strings.Builder
	b.WriteString("m")
	for i := range n {
		fmt.Fprintf(&b, ",k%d=v", i)
	}
	if dup {
		fmt.Fprintf(&b, ",k%d=w", n/2)
	}
	b.WriteString(" v=1 1\n")
	return b.String()
}

// TestManyTags checks duplicate tag keys among many tags, where they are
// found by sorting.
func TestManyTags(t *testing.T) {
	for _, n := range []int{2, 16, 17, 1000, 16000} {
		in := manyTags(n, false) + manyTags(n, true)
		res, err := lineproto.Write(context.Background(), &countDB{}, strings.NewReader(in), lineproto.Options{MaxLineBytes: 1 << 20})
		if err != nil || res.Points != 1 || res.RejectedCount != 1 || res.Rejected[0].Line != 2 ||
			!strings.Contains(res.Rejected[0].Error(), fmt.Sprintf("duplicate tag key \"k%d\"", n/2)) {
			t.Errorf("%d tags: %+v, %v", n, res, err)
		}
	}
}

// BenchmarkManyTags shows the cost of a line per tag: flat as the number of
// tags grows.
func BenchmarkManyTags(b *testing.B) {
	for _, n := range []int{1000, 16000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			in := manyTags(n, false)
			for b.Loop() {
				res, err := lineproto.Write(context.Background(), &countDB{}, strings.NewReader(in), lineproto.Options{MaxLineBytes: 1 << 20})
				if err != nil || res.Points != 1 {
					b.Fatal(res, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/tag")
		})
	}
}

// funcReader produces n lines made by line(i) without holding them, and
// calls at(i) before producing line i.
type funcReader struct {
	i, n int
	line func(dst []byte, i int) []byte
	at   func(i int)
	buf  []byte
}

func (r *funcReader) Read(p []byte) (int, error) {
	for len(r.buf) < len(p) && r.i < r.n {
		if r.at != nil {
			r.at(r.i)
		}
		r.buf = r.line(r.buf, r.i)
		r.i++
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.buf)
	r.buf = r.buf[:copy(r.buf, r.buf[n:])]
	return n, nil
}

// TestTablesBounded checks that the tables Write keeps to parse repeated
// names and series quickly stay bounded in bytes when every line brings a
// new, long series: the live heap after a GC does not grow with the input.
func TestTablesBounded(t *testing.T) {
	const n, first = 60_000, 10_000
	pad := strings.Repeat("x", 900)
	heap := map[int]uint64{}
	r := &funcReader{n: n,
		line: func(dst []byte, i int) []byte {
			return fmt.Appendf(dst, "m,host=%s%d,dc=%s%d v=1 %d\n", pad, i, pad[:100], i, i)
		},
		at: func(i int) {
			if i == first || i == n-1 {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				heap[i] = ms.HeapAlloc
			}
		},
	}
	res, err := lineproto.Write(context.Background(), &countDB{}, r, lineproto.Options{})
	if err != nil || res.Points != n {
		t.Fatalf("Write: %+v, %v", res, err)
	}
	// Unbounded, the series table alone would grow by some 50 MB.
	if grow := int64(heap[n-1]) - int64(heap[first]); grow > 20<<20 {
		t.Errorf("live heap grew by %d bytes over %d new series", grow, n-first)
	}
}

// TestSmallWriteMemory checks that a Write of a few lines, as an HTTP
// server makes for every request, allocates little: its read buffers are
// recycled from one Write to the next.
func TestSmallWriteMemory(t *testing.T) {
	const in = "m,host=a v=1 1\nm,host=b v=2 2\nm,host=a v=3 3\n"
	write := func() {
		res, err := lineproto.Write(context.Background(), &countDB{}, strings.NewReader(in), lineproto.Options{})
		if err != nil || res.Points != 3 {
			t.Fatalf("Write: %+v, %v", res, err)
		}
	}
	write()
	const n = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		write()
	}
	runtime.ReadMemStats(&after)
	// Two fresh 64 KiB read buffers would be 128 KiB a Write; recycled, a
	// Write takes some 8 KiB (more under the race detector, whose pools
	// drop a quarter of what they are given).
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 64<<10 {
		t.Errorf("a Write of three lines allocated %d bytes", per)
	}
}
