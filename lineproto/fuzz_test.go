package lineproto_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/influxdata/line-protocol/v2/lineprotocol"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/lineproto"
)

// FuzzWrite checks that any input is handled without a panic, that every
// entry is either written or rejected once, in line order, and that the
// written points survive a round trip through line protocol. Seeds are in
// testdata/fuzz/FuzzWrite.
func FuzzWrite(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		opts := lineproto.Options{
			BatchSize:    1 + len(in)%4,
			MaxLineBytes: 64,
			Now:          fixedNow,
			Precision:    lineproto.Precision(len(in) % 4),
			MaxRejected:  len(in) + 1,
		}
		db := newMemDB()
		res, err := lineproto.Write(context.Background(), db, bytes.NewReader(in), opts)
		if err != nil {
			t.Fatalf("Write: %v", err)
		}
		if db.invalid > 0 {
			t.Fatalf("handed the DB %d points that fail point.Validate", db.invalid)
		}
		if res.Lines != res.Points+res.RejectedCount || res.Points != len(db.points) || len(res.Rejected) != res.RejectedCount {
			t.Fatalf("Lines %d, Points %d, Rejected %d of %d, stored %d", res.Lines, res.Points, len(res.Rejected), res.RejectedCount, len(db.points))
		}
		phys := bytes.Count(in, []byte("\n")) + 1
		last := 0
		for _, le := range res.Rejected {
			if le.Line <= last || le.Line > phys || le.Err == nil {
				t.Fatalf("rejected line %d after %d of %d lines: %v", le.Line, last, phys, le)
			}
			if !strings.HasPrefix(le.Error(), fmt.Sprintf("line %d: ", le.Line)) {
				t.Fatalf("bad message %q", le)
			}
			last = le.Line
		}

		// Without quotes, every entry is one physical line: one that is
		// neither blank (spaces, and a final CR) nor a comment (spaces, '#'
		// and printable bytes, and a final CR).
		if bytes.IndexByte(in, '"') < 0 {
			n := 0
			for line := range bytes.SplitSeq(in, []byte("\n")) {
				l := bytes.TrimLeft(bytes.TrimSuffix(line, []byte("\r")), " ")
				comment := len(l) > 0 && l[0] == '#' && !bytes.ContainsFunc(l, func(r rune) bool {
					return r < 0x20 || r == 0x7f
				})
				if len(l) > 0 && !comment {
					n++
				}
			}
			if res.Lines != n {
				t.Fatalf("Lines %d, want %d", res.Lines, n)
			}
		}

		// On input the decoder accepts as a whole (so no entry is malformed
		// and the splitter had nothing to recover from), the entries and
		// points are the decoder's, except for the few lines that Write
		// checks more strictly.
		if want, ok := decodeAll(in, opts.Precision); ok {
			db := newMemDB()
			db.anyKind = true
			opts.MaxLineBytes = 1 << 20
			res, err := lineproto.Write(context.Background(), db, bytes.NewReader(in), opts)
			if err != nil || res.Lines != len(want) {
				t.Fatalf("%d entries for the decoder, Write: %+v, %v", len(want), res, err)
			}
			for _, le := range res.Rejected {
				if !strings.Contains(le.Error(), "invalid float") && !strings.Contains(le.Error(), "duplicate tag key") {
					t.Fatalf("Write rejected a line the decoder accepts: %v", le)
				}
			}
			j := 0
			for _, p := range db.points {
				for j < len(want) && !samePoint(p, want[j]) {
					j++
				}
				if j == len(want) {
					t.Fatalf("Write made a point the decoder did not: %s", showPoint(p))
				}
				j++
			}
		}

		// Round trip: the points written, encoded again, give the same points.
		var enc []byte
		for _, p := range db.points {
			var ok bool
			if enc, ok = appendLine(enc, p); !ok {
				return
			}
		}
		db2 := newMemDB()
		res2, err := lineproto.Write(context.Background(), db2, bytes.NewReader(enc), lineproto.Options{
			BatchSize: 3, MaxLineBytes: 1 << 20,
		})
		if err != nil || len(res2.Rejected) > 0 || res2.Points != len(db.points) {
			t.Fatalf("round trip of %q: %+v, %v", enc, res2, err)
		}
		for i := range db.points {
			if !samePoint(db.points[i], db2.points[i]) {
				t.Fatalf("round trip of point %d:\n got %s\nwant %s", i, showPoint(db2.points[i]), showPoint(db.points[i]))
			}
		}
	})
}

// decodeAll decodes in with the lineprotocol decoder alone. It reports false
// if any entry is malformed.
func decodeAll(in []byte, prec lineproto.Precision) ([]point.Point, bool) {
	d := lineprotocol.NewDecoderWithBytes(in)
	var pts []point.Point
	for d.Next() {
		m, err := d.Measurement()
		if err != nil {
			return nil, false
		}
		p := point.Point{Measurement: string(m)}
		for {
			k, v, err := d.NextTag()
			if err != nil {
				return nil, false
			}
			if k == nil {
				break
			}
			p.Tags = append(p.Tags, point.Tag{Key: string(k), Value: string(v)})
		}
		for {
			k, v, err := d.NextField()
			if err != nil {
				return nil, false
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
			i := slices.IndexFunc(p.Fields, func(f point.Field) bool { return f.Key == string(k) })
			if i >= 0 {
				p.Fields[i].Value = val
			} else {
				p.Fields = append(p.Fields, point.Field{Key: string(k), Value: val})
			}
		}
		ts, err := d.Time(lineprotocol.Precision(prec), now0)
		if err != nil {
			return nil, false
		}
		p.Time = ts.UnixNano()
		pts = append(pts, p)
	}
	return pts, d.Err() == nil
}

// appendLine appends p as a line of line protocol with nanosecond time,
// leaving newlines in strings raw. It reports false for a name that ends
// with a backslash, which the decoder's escapes cannot express.
func appendLine(dst []byte, p point.Point) ([]byte, bool) {
	name := func(dst []byte, s, special string) ([]byte, bool) {
		if strings.HasSuffix(s, `\`) {
			return dst, false
		}
		for i := 0; i < len(s); i++ {
			if strings.IndexByte(special, s[i]) >= 0 {
				dst = append(dst, '\\')
			}
			dst = append(dst, s[i])
		}
		return dst, true
	}
	ok := true
	dst, ok = name(dst, p.Measurement, " ,")
	for _, t := range p.Tags {
		dst = append(dst, ',')
		dst, ok = name(dst, t.Key, " ,=")
		if ok {
			dst = append(dst, '=')
			dst, ok = name(dst, t.Value, " ,=")
		}
		if !ok {
			return dst, false
		}
	}
	if !ok {
		return dst, false
	}
	for i, f := range p.Fields {
		dst = append(dst, " ,"[min(i, 1)])
		if dst, ok = name(dst, f.Key, " ,="); !ok {
			return dst, false
		}
		dst = append(dst, '=')
		v := f.Value
		switch v.Kind() {
		case point.KindFloat:
			dst = strconv.AppendFloat(dst, v.Float(), 'g', -1, 64)
		case point.KindInt:
			dst = append(strconv.AppendInt(dst, v.Int(), 10), 'i')
		case point.KindUint:
			dst = append(strconv.AppendUint(dst, v.Uint(), 10), 'u')
		case point.KindBool:
			dst = strconv.AppendBool(dst, v.Bool())
		case point.KindString:
			dst = append(dst, '"')
			s := v.Str()
			for i := 0; i < len(s); i++ {
				if s[i] == '"' || s[i] == '\\' {
					dst = append(dst, '\\')
				}
				dst = append(dst, s[i])
			}
			dst = append(dst, '"')
		}
	}
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, p.Time, 10)
	return append(dst, '\n'), true
}
