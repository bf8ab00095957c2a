package lineproto_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/lineproto"
)

// writeOnly hides the engine's SampleAppender: lineproto uses db.Write.
type writeOnly struct{ db *engine.DB }

func (w writeOnly) Write(points []point.Point) error { return w.db.Write(points) }

// countingApp counts the samples an appender is handed.
type countingDB struct {
	*engine.DB
	apps int
}

func (c *countingDB) SampleAppender() point.SampleAppender {
	c.apps++
	return c.DB.SampleAppender()
}

func openQuiet(t testing.TB) *engine.DB {
	t.Helper()
	db, err := engine.Open(t.TempDir(), &engine.Options{Sync: engine.SyncNever, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// dumpAll renders every measurement's data.
func dumpAll(t testing.TB, db *engine.DB) string {
	t.Helper()
	ms, err := db.Measurements(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, m := range ms {
		res, err := db.Query(context.Background(), engine.Query{Selector: engine.Selector{Measurement: m}})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res {
			fmt.Fprintf(&b, "%s %v %s:", s.Measurement, s.Tags, s.Field)
			for _, x := range s.Samples {
				fmt.Fprintf(&b, " %d=%s(%v)", x.Time, x.Value.Kind(), x.Value)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// randomInput makes line protocol over a few series, fields and kinds, with
// conflicts, duplicate fields, invalid lines and tags in either order.
func randomInput(r *rand.Rand, lines int) []byte {
	var b bytes.Buffer
	vals := []string{"1", "2.5", "3i", "4u", "true", `"s"`, "bad", "-0.25"}
	for i := range lines {
		m := []string{"m", "n"}[r.IntN(2)]
		h, d := fmt.Sprint("h", r.IntN(4)), fmt.Sprint("d", r.IntN(2))
		switch r.IntN(8) {
		case 0:
			fmt.Fprintf(&b, "%s,dc=%s,host=%s", m, d, h)
		case 1:
			fmt.Fprintf(&b, "%s,host=%s,dc=%s", m, h, d)
		case 2:
			fmt.Fprintf(&b, "%s,host=%s,host=%s", m, h, h) // duplicate tag key
		case 3:
			fmt.Fprintf(&b, "%s", m)
		default:
			fmt.Fprintf(&b, "%s,host=%s", m, h)
		}
		b.WriteByte(' ')
		nf := 1 + r.IntN(3)
		for j := range nf {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "f%d=%s", r.IntN(3), vals[r.IntN(len(vals))])
		}
		fmt.Fprintf(&b, " %d\n", 1000+r.IntN(lines+1)+i%3)
	}
	return b.Bytes()
}

// checkSamePath writes in through the appender and through Write into two
// fresh databases, in several calls, and wants the same results and the
// same data.
func checkSamePath(t *testing.T, in []byte, batch int) {
	t.Helper()
	a, w := openQuiet(t), openQuiet(t)
	ca := &countingDB{DB: a}
	opts := lineproto.Options{BatchSize: batch, Now: fixedNow, MaxRejected: 1 << 20}
	// Several calls: the pooled tables keep refs from one to the next.
	parts := bytes.SplitAfter(in, []byte("\n"))
	for k := 0; k < len(parts); k += 7 {
		chunk := bytes.Join(parts[k:min(k+7, len(parts))], nil)
		ra, erra := lineproto.Write(context.Background(), ca, bytes.NewReader(chunk), opts)
		rw, errw := lineproto.Write(context.Background(), writeOnly{w}, bytes.NewReader(chunk), opts)
		if erra != nil || errw != nil {
			t.Fatalf("errors: appender %v, Write %v", erra, errw)
		}
		if fmt.Sprint(ra) != fmt.Sprint(rw) {
			t.Fatalf("input:\n%s\nappender: %+v\nWrite:    %+v", chunk, ra, rw)
		}
	}
	if ca.apps == 0 {
		t.Fatal("lineproto did not use the appender")
	}
	if da, dw := dumpAll(t, a), dumpAll(t, w); da != dw {
		t.Fatalf("input:\n%s\nappender stored:\n%s\nWrite stored:\n%s", in, da, dw)
	}
}

// Through the appender lineproto stores, rejects and counts exactly what
// it does through Write.
func TestAppenderPathMatchesWrite(t *testing.T) {
	for seed := range 20 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		checkSamePath(t, randomInput(r, 60), 1+r.IntN(10))
	}
}

// FuzzAppenderPath runs checkSamePath on fuzzed input.
func FuzzAppenderPath(f *testing.F) {
	for seed := range 4 {
		f.Add(randomInput(rand.New(rand.NewPCG(uint64(seed), 9)), 20), uint8(seed+1))
	}
	f.Add([]byte("m v=1 1\nm v=2i 2\nm v=3 3\nm,a=1 v=1,v=2 4\n"), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, batch uint8) {
		if len(in) > 4096 {
			return
		}
		checkSamePath(t, in, 1+int(batch%16))
	})
}

// A DB handle's refs are not used on another: the same writer tables
// (pooled) serve two databases in turn, and each gets its own series.
func TestAppenderRefsPerDB(t *testing.T) {
	a, b := openQuiet(t), openQuiet(t)
	for i := range 3 {
		in := fmt.Sprintf("m,host=x f%d=1 1\nm,host=y f%d=2 2\n", i, i)
		for _, db := range []*engine.DB{a, b} {
			if _, err := lineproto.Write(context.Background(), db, strings.NewReader(in), lineproto.Options{}); err != nil {
				t.Fatal(i, err)
			}
		}
	}
	da, db := dumpAll(t, a), dumpAll(t, b)
	if da != db || strings.Count(da, "\n") != 6 {
		t.Fatalf("a:\n%s\nb:\n%s", da, db)
	}
}
