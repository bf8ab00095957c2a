package lineproto_test

// Black-box tests of the lineproto contract (docs/design.md) against a real
// engine.DB: InfluxDB's partial write, line numbering, counts, precision
// and the Now clock.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/lineproto"
)

func contractDB(t *testing.T) *engine.DB {
	t.Helper()
	db, err := engine.Open(t.TempDir(), &engine.Options{Sync: engine.SyncNever, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func contractRead(t *testing.T, db *engine.DB, m string) string {
	t.Helper()
	res, err := db.Query(context.Background(), engine.Query{Selector: engine.Selector{Measurement: m}})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range res {
		b.WriteString(s.Measurement)
		for _, tg := range s.Tags {
			b.WriteString("," + tg.Key + "=" + tg.Value)
		}
		b.WriteString(" " + s.Field + ":")
		for _, x := range s.Samples {
			b.WriteString(" " + x.Value.Kind().String() + "(" + x.Value.String() + ")@" + time.Unix(0, x.Time).UTC().Format(time.RFC3339Nano))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestContractPartialWrite(t *testing.T) {
	db := contractDB(t)
	in := strings.Join([]string{
		`cpu,host=a value=1 10000000000`,   // 1
		``,                                 // 2
		`# a comment`,                      // 3
		`cpu,host=b value=bad 20000000000`, // 4: rejected
		`str,host=a s="multi`,              // 5: one entry over two lines
		`line" 30000000000`,                // 6
		`cpu,host=a value=2i 40000000000`,  // 7: kind conflict, rejected
		`cpu value=3`,                      // 8: no timestamp: Now
		`cpu,host=a value=NaN 50000000000`, // 9: rejected
		`garbage`,                          // 10: rejected
		`   `,                              // 11: blank
		`cpu,host=c value=4 60000000000`,   // 12
	}, "\n")
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	res, err := lineproto.Write(context.Background(), db, strings.NewReader(in), lineproto.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatalf("Write: %v (a nil error is due when the input was read to the end)", err)
	}
	if res.Lines != 8 || res.Points != 4 {
		t.Errorf("Lines, Points = %d, %d; want 8, 4", res.Lines, res.Points)
	}
	var lines []int
	for _, le := range res.Rejected {
		lines = append(lines, le.Line)
		if !strings.HasPrefix(le.Error(), "line ") {
			t.Errorf("LineError %q does not start with its line", le.Error())
		}
	}
	if want := []int{4, 7, 9, 10}; !equalInts(lines, want) {
		t.Errorf("rejected lines %v, want %v", lines, want)
	}
	if len(res.Rejected) >= 2 && !errors.Is(res.Rejected[1].Err, engine.ErrFieldTypeConflict) {
		t.Errorf("line 7: %v, want a field type conflict", res.Rejected[1].Err)
	}
	got := contractRead(t, db, "cpu") + contractRead(t, db, "str")
	want := "cpu value: float(3)@2024-05-01T12:00:00Z\n" +
		"cpu,host=a value: float(1)@1970-01-01T00:00:10Z\n" +
		"cpu,host=c value: float(4)@1970-01-01T00:01:00Z\n" +
		"str,host=a s: string(multi\nline)@1970-01-01T00:00:30Z\n"
	if got != want {
		t.Errorf("stored:\n%s\nwant:\n%s", got, want)
	}
}

func TestContractPrecisionAndNow(t *testing.T) {
	db := contractDB(t)
	in := "p,i=1 v=1 1700000000\np,i=2 v=2\np,i=3 v=3\np,i=4 v=4\np,i=5 v=5\n"
	calls := 0
	res, err := lineproto.Write(context.Background(), db, strings.NewReader(in), lineproto.Options{
		Precision: lineproto.Second,
		BatchSize: 2,
		Now: func() time.Time {
			calls++
			return time.Unix(int64(100*calls), 123456789)
		},
	})
	if err != nil || res.Points != 5 || len(res.Rejected) != 0 {
		t.Fatalf("Write = %+v, %v", res, err)
	}
	// Batches: [1 2] [3 4] [5]; Now is read once per batch and truncated to
	// the precision.
	want := "p,i=1 v: float(1)@2023-11-14T22:13:20Z\n" +
		"p,i=2 v: float(2)@1970-01-01T00:01:40Z\n" +
		"p,i=3 v: float(3)@1970-01-01T00:03:20Z\n" +
		"p,i=4 v: float(4)@1970-01-01T00:03:20Z\n" +
		"p,i=5 v: float(5)@1970-01-01T00:05:00Z\n"
	if got := contractRead(t, db, "p"); got != want {
		t.Errorf("stored:\n%s\nwant:\n%s", got, want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A line that would create a series past the DB's limit is rejected like an
// invalid one; the other lines of its batch land.
func TestContractSeriesLimit(t *testing.T) {
	db, err := engine.Open(t.TempDir(), &engine.Options{Sync: engine.SyncNever, MaxSeries: 2,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	in := strings.Join([]string{
		`cpu,host=a value=1 1`, // 1
		`cpu,host=b value=1 1`, // 2
		`cpu,host=c value=1 1`, // 3: a third series, refused
		`cpu,host=a value=2 2`, // 4
		`cpu,host=d value=1 1`, // 5: refused
		`cpu,host=b value=2 2`, // 6
	}, "\n")
	res, err := lineproto.Write(context.Background(), db, strings.NewReader(in), lineproto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Points != 4 || len(res.Rejected) != 2 || res.Rejected[0].Line != 3 || res.Rejected[1].Line != 5 ||
		!errors.Is(res.Rejected[0].Err, engine.ErrSeriesLimit) {
		t.Fatalf("result %+v, rejected %v; want 4 points, lines 3 and 5 refused for the series limit", res, res.Rejected)
	}
	want := "cpu,host=a value: float(1)@1970-01-01T00:00:00.000000001Z float(2)@1970-01-01T00:00:00.000000002Z\n" +
		"cpu,host=b value: float(1)@1970-01-01T00:00:00.000000001Z float(2)@1970-01-01T00:00:00.000000002Z\n"
	if got := contractRead(t, db, "cpu"); got != want {
		t.Fatalf("stored:\n%s\nwant:\n%s", got, want)
	}
}
