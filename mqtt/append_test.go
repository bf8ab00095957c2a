package mqtt

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// TestAckOnlyAfterCommit: on the appender path a message is acknowledged
// only after the Commit that stores its points returned nil. While every
// Commit fails (injected just before Commit), the broker still holds the
// messages unacknowledged in flight to the subscriber and nothing is
// stored; after a restart of the subscriber (same client id, the failure
// gone) the broker delivers them again and they are stored. A subscriber
// that acknowledged on receipt, or before its Commit, fails both checks.
func TestAckOnlyAfterCommit(t *testing.T) {
	srv, broker := startMochi(t)
	db := openDB(t)
	const id = "strata-ack"
	opts := Options{Brokers: []string{broker}, ClientID: id, Subscriptions: []Subscription{{Filter: "a/#"}}}
	var failing atomic.Bool
	failing.Store(true)
	calls := make(chan struct{}, 64)
	s, stop := runSubscriber(t, db, opts, func(s *Subscriber) {
		s.beforeCommit = func() error {
			select {
			case calls <- struct{}{}:
			default:
			}
			if failing.Load() {
				return errors.New("injected: disk on fire")
			}
			return nil
		}
	})
	if s.app == nil {
		t.Fatal("the subscriber of an *engine.DB has no appender")
	}
	waitSubscribed(t, s)
	pub := publisher(t, broker, "pub-ack")
	publish(t, pub, "a/1", []byte("m v=2 2"))
	// Three failed Commits: the batch has been retried since.
	for range 3 {
		select {
		case <-calls:
		case <-time.After(20 * time.Second):
			t.Fatal("no Commit attempted")
		}
	}
	cl, ok := srv.Clients.Get(id)
	if !ok {
		t.Fatal("the broker does not know the subscriber")
	}
	// The broker sets a message in flight before it sends it.
	if n := cl.State.Inflight.Len(); n != 1 {
		t.Fatalf("the broker holds %d unacknowledged messages for the subscriber, want 1: the message was acknowledged before its Commit", n)
	}
	stop()
	if n := s.Stats().Filters[0].Messages; n != 0 {
		t.Fatalf("%d messages counted as acknowledged though no Commit succeeded", n)
	}
	if se := queryAll(t, db, "m"); len(se) != 0 {
		t.Fatalf("stored %+v though every Commit failed", se)
	}

	failing.Store(false)
	s2, _ := runSubscriber(t, db, opts)
	waitMessages(t, s2, 0, 1)
	se := queryAll(t, db, "m")
	if len(se) != 1 || len(se[0].Samples) != 1 || se[0].Samples[0].Value != engine.Float(2) {
		t.Fatalf("stored %+v after recovery, want the redelivered point", se)
	}
}

// TestCommitRefusedFallsBackToWrite: a batch whose Commit is refused for a
// series limit is stored through Write, which drops the refused point
// alone; the points of a known series go by their remembered refs.
func TestCommitRefusedFallsBackToWrite(t *testing.T) {
	db, err := engine.Open(t.TempDir(), &engine.Options{MaxSeriesPerMeasurement: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := New(db, &Options{Brokers: []string{"tcp://127.0.0.1:1"}, ClientID: "x", Subscriptions: []Subscription{{Filter: "#"}}})
	if err != nil {
		t.Fatal(err)
	}
	flush := func(payloads ...string) []inbound {
		t.Helper()
		var batch []inbound
		for _, p := range payloads {
			batch = append(batch, inbound{msg: &fakeMessage{topic: "t", payload: []byte(p)}, recv: s.opts.Now()})
		}
		if err := s.flush(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
		for i, m := range batch {
			if !m.msg.(*fakeMessage).acked {
				t.Fatalf("message %d not acknowledged", i)
			}
		}
		return batch
	}
	flush("m,h=a v=1,w=1 1", "m,h=a v=2,w=2 2")
	flush("m,h=a v=3,w=3 3", "m,h=b v=1 1", "m,h=c v=1 1", "m,h=a v=4 4")
	st := s.Stats().Filters[0]
	if st.Messages != 6 || st.Failures != 1 || st.DroppedPoints != 1 || st.Points != 5 {
		t.Errorf("stats = %+v, want 6 messages, 1 failure, 1 dropped, 5 points", st)
	}
	got := map[string]int{}
	for _, se := range queryAll(t, db, "m") {
		got[se.Tags[0].Value+"."+se.Field] = len(se.Samples)
	}
	if len(got) != 3 || got["a.v"] != 4 || got["a.w"] != 3 || got["b.v"] != 1 {
		t.Errorf("stored %v", got)
	}
	if n := db.Stats().SeriesLimitRefusals; n != 1 {
		t.Errorf("%d series-limit refusals counted, want 1", n)
	}
}
