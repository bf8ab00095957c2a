package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stratadb/strata/internal/vfs"
	"github.com/stratadb/strata/lineproto"
)

// recorder is a FeedSubscriber that keeps a copy of every record and checks
// the call protocol: each FeedPrepare is followed by a FeedCommit of the
// same seq before the next FeedPrepare.
type recorder struct {
	t       testing.TB
	mu      sync.Mutex
	pending *FeedRecord
	logged  []FeedRecord
	failed  []uint64
}

func (r *recorder) FeedPrepare(rec *FeedRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending != nil {
		r.t.Errorf("FeedPrepare(%d) while %d is pending", rec.Seq, r.pending.Seq)
	}
	c := *rec
	c.Payload = append([]byte(nil), rec.Payload...)
	r.pending = &c
}

func (r *recorder) FeedCommit(seq uint64, logged bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil || r.pending.Seq != seq {
		r.t.Errorf("FeedCommit(%d) without its FeedPrepare", seq)
		return
	}
	if logged {
		r.logged = append(r.logged, *r.pending)
	} else {
		r.failed = append(r.failed, seq)
	}
	r.pending = nil
}

// lines decodes every logged record back to one line per sample,
// "key time value", in feed order.
func (r *recorder) lines(t *testing.T, db *DB) []string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var d FeedDecoder
	var out []string
	var prev uint64
	for _, rec := range r.logged {
		if rec.Seq <= prev {
			t.Fatalf("record %d after %d: not ascending", rec.Seq, prev)
		}
		prev = rec.Seq
		samples, err := d.Decode(rec.Format, rec.Seq, rec.Payload)
		if err != nil {
			t.Fatalf("decode record %d: %v", rec.Seq, err)
		}
		if len(samples) != rec.Samples {
			t.Fatalf("record %d decodes to %d samples, says %d", rec.Seq, len(samples), rec.Samples)
		}
		for _, s := range samples {
			key, info, ok := db.FeedSeries(s.ID)
			if !ok {
				t.Fatalf("record %d: unknown series %d", rec.Seq, s.ID)
			}
			if info.Kind != s.Value.Kind() || !strings.HasPrefix(key, info.Measurement) {
				t.Fatalf("series %d: key %q info %+v value %v", s.ID, key, info, s.Value)
			}
			out = append(out, fmt.Sprintf("%s %d %v", key, s.Time, s.Value))
		}
	}
	return out
}

// The feed carries every logged batch in commit order, from Write and from
// lineproto alike, and decodes back to the samples written; deletes are not
// fed, and Unsubscribe stops the calls.
func TestFeedCarriesEveryWrite(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	r := &recorder{t: t}
	info, err := db.Subscribe(r)
	if err != nil {
		t.Fatal(err)
	}
	if info.RecoveredSeq != 0 || info.Seq != 0 {
		t.Fatalf("fresh database: %+v", info)
	}
	mustWrite(t, db,
		Point{Measurement: "cpu", Tags: []Tag{{Key: "host", Value: "a"}}, Fields: []Field{{Key: "user", Value: Float(1.5)}, {Key: "n", Value: Int(-3)}}, Time: 10},
		Point{Measurement: "cpu", Tags: []Tag{{Key: "host", Value: "b"}}, Fields: []Field{{Key: "ok", Value: Bool(true)}}, Time: 5})
	mustDelete(t, db, Selector{Measurement: "cpu", Start: 0, End: 100})
	res, err := lineproto.Write(context.Background(), db, strings.NewReader("mem,host=a free=7u 20\nmem,host=a msg=\"hi\" 21\n"), lineproto.Options{})
	if err != nil || len(res.Rejected) > 0 {
		t.Fatalf("lineproto: %v %v", err, res.Rejected)
	}
	// A rejected write is not fed at all.
	if err := db.Write([]Point{{Measurement: "cpu", Tags: []Tag{{Key: "host", Value: "a"}}, Fields: []Field{{Key: "user", Value: Int(1)}}, Time: 30}}); !errors.Is(err, ErrFieldTypeConflict) {
		t.Fatalf("conflicting write: %v", err)
	}
	db.Unsubscribe(r)
	mustWrite(t, db, pt("cpu", nil, "x", Float(1), 40))

	want := []string{
		"cpu,host=a user 10 1.5",
		"cpu,host=a n 10 -3",
		"cpu,host=b ok 5 true",
		"mem,host=a free 20 7",
		"mem,host=a msg 21 hi",
	}
	got := r.lines(t, db)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("feed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(r.failed) != 0 || r.pending != nil {
		t.Fatalf("failed %v pending %v", r.failed, r.pending)
	}
}

// A batch whose WAL write fails is committed as not logged, and nothing of
// it is stored.
func TestFeedWALFailure(t *testing.T) {
	inj := &vfs.OnIndex{N: 1, Sticky: true, Match: func(op vfs.Op, name string) bool {
		return op == vfs.OpWrite && strings.HasSuffix(name, ".wal")
	}}
	opts := quietOptions()
	opts.fs = vfs.Inject(vfs.Default, inj.Injector())
	db := openDB(t, t.TempDir(), opts)
	r := &recorder{t: t}
	if _, err := db.Subscribe(r); err != nil {
		t.Fatal(err)
	}
	// The first matching write is the file header; the second fails.
	if err := db.Write([]Point{pt("m", nil, "v", Float(1), 1)}); err == nil {
		t.Fatal("write with failing WAL succeeded")
	}
	if len(r.failed) != 1 || len(r.logged) != 0 || r.pending != nil {
		t.Fatalf("logged %d failed %v pending %v", len(r.logged), r.failed, r.pending)
	}
	if n := len(mustQuery(t, db, rawAll("m"))); n != 0 {
		t.Fatalf("%d series stored after a failed write", n)
	}
}

// After a restart RecoveredSeq is the last logged sequence number, and Seq
// counts writes made before Subscribe.
func TestFeedRecoveredSeq(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir, quietOptions())
	for i := range 3 {
		mustWrite(t, db, pt("m", nil, "v", Float(1), int64(i)))
	}
	mustDelete(t, db, Selector{Measurement: "m", Start: 0, End: 1})
	crash := crashCopy(t, dir) // WAL only: as a kill -9 leaves it
	db = reopen(t, db, dir, quietOptions())
	info, err := db.Subscribe(&recorder{t: t})
	if err != nil {
		t.Fatal(err)
	}
	if info.RecoveredSeq != 4 || info.Seq != 4 {
		t.Fatalf("after close and reopen: %+v, want 4 and 4", info)
	}

	cdb := openDB(t, crash, quietOptions())
	mustWrite(t, cdb, pt("m", nil, "v", Float(2), 9))
	info, err = cdb.Subscribe(&recorder{t: t})
	if err != nil {
		t.Fatal(err)
	}
	if info.RecoveredSeq != 4 || info.Seq != 5 {
		t.Fatalf("after crash: %+v, want recovered 4 and seq 5", info)
	}
	cdb.Close()
	if _, err := cdb.Subscribe(&recorder{t: t}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
}

func TestFeedDecodeRejects(t *testing.T) {
	db := openDB(t, t.TempDir(), quietOptions())
	r := &recorder{t: t}
	if _, err := db.Subscribe(r); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, db, pt("m", nil, "v", Float(1), 1))
	rec := r.logged[0]
	var d FeedDecoder
	if _, err := d.Decode(rec.Format, rec.Seq+1, rec.Payload); !errors.Is(err, ErrCorrupt) {
		t.Errorf("wrong seq: %v", err)
	}
	if _, err := d.Decode(99, rec.Seq, rec.Payload); !errors.Is(err, ErrCorrupt) {
		t.Errorf("unknown format: %v", err)
	}
	if _, err := d.Decode(rec.Format, rec.Seq, rec.Payload[:len(rec.Payload)-1]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated payload: %v", err)
	}
	if _, _, ok := db.FeedSeries(1 << 40); ok {
		t.Error("FeedSeries of an unknown id")
	}
}
