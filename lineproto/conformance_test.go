package lineproto_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/iotest"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"

	"github.com/stratadb/strata/internal/base"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/lineproto"
)

// refEntry is an entry as the reference decoder sees it.
type refEntry struct {
	line int // physical line where it starts
	ok   bool
	p    point.Point
}

// byteReader hands out one byte per Read, so that the decoder has read
// exactly up to the start of an entry (and at most one byte past it, never a
// newline) when its Next returns.
type byteReader struct {
	b []byte
	n int // bytes read
}

func (r *byteReader) Read(p []byte) (int, error) {
	if r.n == len(r.b) {
		return 0, errors.New("EOF") // io.EOF, spelled so as not to trip the linter
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.b[r.n]
	r.n++
	return 1, nil
}

// reference decodes in with the lineprotocol decoder alone, as InfluxDB
// does: each entry with the line it starts on, whether the decoder accepts
// it and its point.
func reference(t *testing.T, in []byte, prec lineproto.Precision) []refEntry {
	r := &byteReader{b: in}
	d := lineprotocol.NewDecoder(r)
	var out []refEntry
	for d.Next() {
		e := refEntry{line: 1 + bytes.Count(in[:r.n], []byte("\n"))}
		e.p, e.ok = refPoint(d, prec)
		out = append(out, e)
	}
	if err := d.Err(); err != nil && err.Error() != "EOF" {
		t.Fatalf("reference decoder: %v", err)
	}
	return out
}

func refPoint(d *lineprotocol.Decoder, prec lineproto.Precision) (point.Point, bool) {
	var p point.Point
	m, err := d.Measurement()
	if err != nil {
		return p, false
	}
	p.Measurement = string(m)
	for {
		k, v, err := d.NextTag()
		if err != nil {
			return p, false
		}
		if k == nil {
			break
		}
		p.Tags = append(p.Tags, point.Tag{Key: string(k), Value: string(v)})
	}
	for {
		k, v, err := d.NextField()
		if err != nil {
			return p, false
		}
		if k == nil {
			break
		}
		var val point.Value
		switch v.Kind() {
		case lineprotocol.Float:
			val = point.Float(v.FloatV())
		case lineprotocol.Int:
			val = point.Int(v.IntV())
		case lineprotocol.Uint:
			val = point.Uint(v.UintV())
		case lineprotocol.Bool:
			val = point.Bool(v.BoolV())
		case lineprotocol.String:
			val = point.String(v.StringV())
		}
		if i := slices.IndexFunc(p.Fields, func(f point.Field) bool { return f.Key == string(k) }); i >= 0 {
			p.Fields[i].Value = val // the last value wins
		} else {
			p.Fields = append(p.Fields, point.Field{Key: string(k), Value: val})
		}
	}
	ts, err := d.Time(lineprotocol.Precision(prec), now0)
	if err != nil {
		return p, false
	}
	p.Time = ts.UnixNano()
	return p, true
}

func dupTagKeys(p point.Point) bool {
	for i := range p.Tags {
		for _, u := range p.Tags[:i] {
			if u.Key == p.Tags[i].Key {
				return true
			}
		}
	}
	return false
}

// FuzzConformance checks Write against the reference decoder, line by line:
// for any input, the lines Write rejects are the lines where the decoder
// rejects an entry, and the points Write makes are the decoder's, in order.
// The one difference is documented: a point with a duplicate tag key, which
// the decoder passes and the data model forbids, is rejected. Line length is
// not limited here; seeds run as ordinary tests.
func FuzzConformance(f *testing.F) {
	for _, s := range []string{
		"cpu v=1 1\n",
		"\tcpu v=1 1\ncpu v=2 2\n",
		"# comment \x01 with a control byte\ncpu v=1 1\n",
		"#\tcomment\r\n  # ok\r\n",
		"cpu v=1 1\t\ncpu\tv=1\n \t\n\t\n",
		"cpu v=1\r\r\ncpu v=2 2\r\n",
		"cpu v=1 x\ry\ncpu v=1 \rz\n\r\r\n\r",
		"cpu v=1 1\rcpu v=2 2\n",
		"cpu s=\"a\rb\" 1\r\ncpu s=\"\r\n\" 2\r",
		"cpu s=\"x\ny\" 1\ncpu s=\"a\" \rq,s=\"b\nc\" 3\n",
		"cpu v=1x,s=\"multi\nline\" 1\ncpu v=2 2\n",
		"cpu,t=\xff s=\"x\ny\" 1\ncpu v=2 2\n",
		"cpu s=\"\xff\",t=\"x\ny\" 1\ncpu v=2 2\n",
		"cpu v=1_000,w=0x1p-2,x=1e400,y=-inf 1\n",
		"cpu,a=1,a=2 v=1 1\ncpu,a=1,b=2 v=1 1\n",
		"cpu s=\"unterminated\ncpu v=1 1\n",
		"cpu v=1 1\\\ncpu\\ x v=1\\\n",
		"  \r\n \r \n#\x7f\n#\xff\xfe\n",
		"cpu v=1 9223372036854775807\ncpu v=1 -9223372036854775808\ncpu v=1 99999999999\n",
		"cpu,t=a v=1 1\ncpu,t=a v=2 2\ncpu,t=a\tv=3 3\ncpu,t=a v=4\t4\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		prec := lineproto.Precision(len(in) % 4)
		ref := reference(t, in, prec)

		db := newMemDB()
		db.anyKind = true
		res, err := lineproto.Write(context.Background(), db, bytes.NewReader(in), lineproto.Options{
			Precision:    prec,
			Now:          fixedNow,
			BatchSize:    1 + len(in)%5,
			MaxLineBytes: len(in) + 1,
			MaxRejected:  len(in) + 1,
		})
		if err != nil {
			t.Fatalf("Write: %v", err)
		}

		var wantRej []int
		var wantPts []point.Point
		lines := map[int]bool{}
		for _, e := range ref {
			lines[e.line] = true
			if e.ok && !dupTagKeys(e.p) {
				wantPts = append(wantPts, e.p)
				continue
			}
			// The decoder may split a line it rejects into two entries.
			if n := len(wantRej); n == 0 || wantRej[n-1] != e.line {
				wantRej = append(wantRej, e.line)
			}
		}
		var gotRej []int
		for _, le := range res.Rejected {
			gotRej = append(gotRej, le.Line)
			if !errors.Is(le, base.ErrInvalid) {
				t.Errorf("line %d: %v does not match ErrInvalid", le.Line, le)
			}
		}
		if !slices.Equal(gotRej, wantRej) {
			t.Fatalf("%q:\nrejected lines %v\ndecoder rejects %v\n(%v)", in, gotRej, wantRej, res.Rejected)
		}
		if res.Lines != len(lines) || res.Points != len(wantPts) || res.RejectedCount != len(wantRej) {
			t.Fatalf("%q: Lines %d, Points %d, Rejected %d; decoder: %d lines, %d points, %d rejected",
				in, res.Lines, res.Points, res.RejectedCount, len(lines), len(wantPts), len(wantRej))
		}
		for i, p := range db.points {
			if !samePoint(p, wantPts[i]) {
				t.Fatalf("%q: point %d\n got %s\nwant %s", in, i, showPoint(p), showPoint(wantPts[i]))
			}
		}

		// The same, whatever pieces the input arrives in: lines cut by a
		// tiny read buffer, and bytes trickling in one at a time with a
		// linger so short that partial batches are written between them.
		same := func(variant string, res2 lineproto.Result, db2 *memDB) {
			t.Helper()
			if fmt.Sprint(res2) != fmt.Sprint(res) {
				t.Fatalf("%q, %s:\n%+v\nwant\n%+v", in, variant, res2, res)
			}
			for i := range db.points {
				if !samePoint(db2.points[i], db.points[i]) {
					t.Fatalf("%q, %s: point %d\n got %s\nwant %s", in, variant, i, showPoint(db2.points[i]), showPoint(db.points[i]))
				}
			}
		}
		opts := lineproto.Options{
			Precision:    prec,
			Now:          fixedNow,
			BatchSize:    1 + len(in)%5,
			MaxLineBytes: len(in) + 1,
			MaxRejected:  len(in) + 1,
		}
		restore := lineproto.SetReadBufSize(16)
		db2 := newMemDB()
		db2.anyKind = true
		res2, err := lineproto.Write(context.Background(), db2, bytes.NewReader(in), opts)
		restore()
		if err != nil {
			t.Fatal(err)
		}
		same("16-byte read buffer", res2, db2)

		opts.Linger = time.Nanosecond
		db2 = newMemDB()
		db2.anyKind = true
		res2, err = lineproto.Write(context.Background(), db2, iotest.OneByteReader(bytes.NewReader(in)), opts)
		if err != nil {
			t.Fatal(err)
		}
		same("one byte at a time", res2, db2)
	})
}
