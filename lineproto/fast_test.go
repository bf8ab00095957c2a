package lineproto_test

import (
	"bytes"
	"context"
	"io"
	"reflect"
	"testing"

	"github.com/stratadb/strata/lineproto"
)

// FuzzFastPath holds the fast path for lines of known series to the
// decoder's answers: the input, written twice so that its second copy
// meets every series section again, gives the same points, counts and
// rejections, word for word, with the fast path and without it, and read
// in place from a *bytes.Buffer.
func FuzzFastPath(f *testing.F) {
	for _, s := range []string{
		"m,t=a v=1 1\nm,t=a v=2 2\n",
		"m,t=a v=1.5,w=2i,x=3u,y=t,z=FALSE 10\r\n",
		"m,t=a   v=1   20   \nm,t=a v=1\nm,t=a v=1 \r\n",
		"m,t=a v=1,v=2 3\nm,t=a v=-0.0,w=-9223372036854775808i 4\n",
		"m,t=a v=1e400 1\nm,t=a v=1.2.3 1\nm,t=a v=- 1\nm,t=a v=i 1\nm,t=a v=-i 1\n",
		"m,t=a v=1 1-2\nm,t=a v=1 99999999999999999999\nm,t=a v=1 1 2\nm,t=a v=1 x\n",
		"m,t=a v=1,\nm,t=a v=1,,w=2\nm,t=a v=1, w=2\nm,t=a =1\nm,t=a v\nm,t=a v=\n",
		"m,t=a v\\ x=1 1\nm,t=a é=1 1\nm,t=a v=1\x01 1\nm,t=a v=\"s\" 1\nm,t=a v=true=1 1\n",
		"m,t=a v=1 1\nm,t=a v=1i 2\nm,t=a v=2 3\n",
		"m v=1 1\nm w=0x1p-2 2\nm v=.5 3\nm v=5. 4\nm v=+1 5\nm v=1u 6\nm v=18446744073709551616u 7\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		input := append(append(bytes.Clone(in), '\n'), in...)
		opts := lineproto.Options{
			BatchSize:   1 + len(in)%3,
			Now:         fixedNow,
			Precision:   lineproto.Precision(len(in) % 4),
			MaxRejected: len(in)%5 + 1,
		}
		run := func(r io.Reader) (lineproto.Result, []string, *memDB) {
			db := newMemDB()
			res, err := lineproto.Write(context.Background(), db, r, opts)
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			var reasons []string
			for _, le := range res.Rejected {
				reasons = append(reasons, le.Error())
			}
			return res, reasons, db
		}
		fast, fastWhy, fastDB := run(bytes.NewReader(input))
		restore := lineproto.DisableFastPath()
		slow, slowWhy, slowDB := run(bytes.NewReader(input))
		restore()
		// A *bytes.Buffer is read in place: the same again.
		buf, bufWhy, bufDB := run(bytes.NewBuffer(bytes.Clone(input)))
		if buf.Lines != fast.Lines || buf.Points != fast.Points || !reflect.DeepEqual(bufWhy, fastWhy) ||
			!reflect.DeepEqual(bufDB.points, fastDB.points) {
			t.Fatalf("from a buffer: %+v; from a reader: %+v", buf, fast)
		}
		if fast.Lines != slow.Lines || fast.Points != slow.Points || fast.RejectedCount != slow.RejectedCount {
			t.Fatalf("fast path: %d lines, %d points, %d rejected; decoder: %d, %d, %d",
				fast.Lines, fast.Points, fast.RejectedCount, slow.Lines, slow.Points, slow.RejectedCount)
		}
		if !reflect.DeepEqual(fastWhy, slowWhy) {
			t.Fatalf("fast path rejects\n%q\ndecoder\n%q", fastWhy, slowWhy)
		}
		if !reflect.DeepEqual(fastDB.points, slowDB.points) {
			t.Fatalf("fast path stores\n%v\ndecoder\n%v", fastDB.points, slowDB.points)
		}
	})
}

// TestRejectedLineKeepsTheNext: a line rejected for a value the decoder
// reads but Write refuses ends at its newline, as the splitter cut it, even
// when a quote follows the bad value: the lines after it are stored, by the
// decoder and by the fast path alike.
func TestRejectedLineKeepsTheNext(t *testing.T) {
	in := "m v=1 1\nm v=.,w=\" 2\nm v=3 3\nm v=4,s=\"x\" 4\nm v=5 5\n"
	for _, fast := range []bool{true, false} {
		if !fast {
			defer lineproto.DisableFastPath()()
		}
		db := newMemDB()
		res, err := lineproto.Write(context.Background(), db, bytes.NewReader([]byte(in)), lineproto.Options{Now: fixedNow})
		if err != nil {
			t.Fatal(err)
		}
		if res.Points != 4 || res.RejectedCount != 1 || res.Rejected[0].Line != 2 {
			t.Fatalf("fast path %v: %d points, rejected %v", fast, res.Points, res.Rejected)
		}
		for i, want := range []int64{1, 3, 4, 5} {
			if db.points[i].Time != want {
				t.Fatalf("fast path %v: point %d at %d, want %d", fast, i, db.points[i].Time, want)
			}
		}
	}
}
