package lineproto_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/lineproto"
)

// bufferInput is line protocol of many 64 KiB windows: lines of every
// length around the window's size, a line longer than MaxLineBytes, and
// lines that straddle where a window without a newline would end.
func bufferInput() []byte {
	var b bytes.Buffer
	for i := range 20_000 {
		fmt.Fprintf(&b, "m,host=h%d v=%di %d\n", i%37, i, i)
		switch i {
		case 3000:
			fmt.Fprintf(&b, "m,host=long v=%q %d\n", strings.Repeat("x", 70<<10), i) // too long
		case 7000:
			fmt.Fprintf(&b, "m,host=big v=%q %d\n", strings.Repeat("y", 60<<10), i)
		case 9000:
			b.WriteString("m,host=s v=\"two\nlines\" 9000\nm v=.,w=\" 1\n")
		}
	}
	b.WriteString("m v=1 1") // no final newline
	return b.Bytes()
}

// TestBufferInputMatchesReader: a *bytes.Buffer, read in place, gives the
// same points and rejections as the same bytes through an io.Reader, and
// is left empty.
func TestBufferInputMatchesReader(t *testing.T) {
	in := bufferInput()
	opts := lineproto.Options{Now: fixedNow, MaxRejected: 50, BatchSize: 999}
	run := func(r interface {
		Read([]byte) (int, error)
	}) (lineproto.Result, []point.Point) {
		db := newMemDB()
		res, err := lineproto.Write(context.Background(), db, r, opts)
		if err != nil {
			t.Fatal(err)
		}
		return res, db.points
	}
	want, wantPts := run(bytes.NewReader(in))
	buf := bytes.NewBuffer(bytes.Clone(in))
	got, gotPts := run(buf)
	if want.Lines != got.Lines || want.Points != got.Points || want.RejectedCount != got.RejectedCount ||
		fmt.Sprint(want.Rejected) != fmt.Sprint(got.Rejected) {
		t.Fatalf("buffer: %+v\nreader: %+v", got, want)
	}
	if want.Points < 20_000 || want.RejectedCount != 2 {
		t.Fatalf("reader: %d points, rejected %v", want.Points, want.Rejected)
	}
	if !reflect.DeepEqual(wantPts, gotPts) {
		t.Fatal("the points differ")
	}
	if buf.Len() != 0 {
		t.Fatalf("%d bytes left unread in the buffer", buf.Len())
	}
}

// cancelDB cancels the Write that feeds it once it has stored a batch.
type cancelDB struct {
	memDB
	cancel context.CancelFunc
}

func (db *cancelDB) Write(points []point.Point) error {
	err := db.memDB.Write(points)
	db.cancel()
	return err
}

// TestBufferInputCancelled: a cancelled Write of a *bytes.Buffer stops
// within a window, and every line is either in its Result or still unread
// in the buffer.
func TestBufferInputCancelled(t *testing.T) {
	var b bytes.Buffer
	const lines = 50_000
	for i := range lines {
		fmt.Fprintf(&b, "m,host=h%d v=%d %d\n", i%10, i, i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := &cancelDB{memDB: *newMemDB(), cancel: cancel}
	res, err := lineproto.Write(ctx, db, &b, lineproto.Options{BatchSize: 100})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Write: %v", err)
	}
	left := bytes.Count(b.Bytes(), []byte("\n"))
	if res.Lines != res.Points || res.Lines+left != lines {
		t.Fatalf("%d lines read, %d stored, %d left unread; want %d in all", res.Lines, res.Points, left, lines)
	}
	if left == 0 || res.Lines > 64<<10/10 {
		t.Fatalf("cancelled Write read %d lines, left %d", res.Lines, left)
	}
}
