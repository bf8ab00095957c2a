package mqtt

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/stratadb/strata/engine"
)

// startMochi starts an embedded broker on a free loopback port and returns
// its URL.
func startMochi(t *testing.T) (*mochi.Server, string) {
	t.Helper()
	srv := mochi.New(&mochi.Options{InlineClient: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	tcp := listeners.NewTCP(listeners.Config{ID: "t", Address: "127.0.0.1:0"})
	if err := srv.AddListener(tcp); err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	return srv, "tcp://" + tcp.Address()
}

// notifyWriter is a Writer over a DB that reports the points written so
// far, and can be made to fail.
type notifyWriter struct {
	db *engine.DB

	mu      sync.Mutex
	points  int
	writes  int
	failErr error // returned instead of writing while set
	changed chan struct{}
}

func newNotifyWriter(db *engine.DB) *notifyWriter {
	return &notifyWriter{db: db, changed: make(chan struct{})}
}

func (w *notifyWriter) Write(points []engine.Point) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	if w.failErr != nil {
		w.signal()
		return w.failErr
	}
	if err := w.db.Write(points); err != nil {
		return err
	}
	w.points += len(points)
	w.signal()
	return nil
}

func (w *notifyWriter) signal() {
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *notifyWriter) setFail(err error) {
	w.mu.Lock()
	w.failErr = err
	w.mu.Unlock()
}

// waitFor waits until cond (called with the lock held) holds.
func (w *notifyWriter) waitFor(t *testing.T, what string, cond func(w *notifyWriter) bool) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		w.mu.Lock()
		ok, ch := cond(w), w.changed
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (w *notifyWriter) waitPoints(t *testing.T, n int) {
	t.Helper()
	w.waitFor(t, "points", func(w *notifyWriter) bool { return w.points >= n })
}

func openDB(t testing.TB) *engine.DB {
	t.Helper()
	db, err := engine.Open(t.TempDir(), &engine.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// runSubscriber runs a subscriber until the test ends or the returned stop
// is called; stop waits for Run to return. setup runs before Run.
func runSubscriber(t *testing.T, w Writer, opts Options, setup ...func(*Subscriber)) (*Subscriber, func()) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testLogOut(), nil))
	}
	s, err := New(w, &opts)
	if err != nil {
		t.Fatal(err)
	}
	flushes := &flushWatch{changed: make(chan struct{})}
	s.afterFlush = flushes.signal
	watches.Store(s, flushes)
	for _, f := range setup {
		f(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return s, stop
}

// waitSubscribed waits until the broker acknowledged the subscriptions.
func waitSubscribed(t *testing.T, s *Subscriber) {
	t.Helper()
	select {
	case <-s.Ready():
	case <-time.After(20 * time.Second):
		t.Fatal("subscriber did not subscribe")
	}
}

// publisher returns a connected paho client.
func publisher(t *testing.T, broker, id string) paho.Client {
	t.Helper()
	o := paho.NewClientOptions().AddBroker(broker).SetClientID(id).SetCleanSession(true)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}

func publish(t *testing.T, c paho.Client, topic string, payload []byte) {
	t.Helper()
	tok := c.Publish(topic, 1, false, payload)
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("publish %s: %v", topic, tok.Error())
	}
}

func queryAll(t *testing.T, db *engine.DB, measurement string) []engine.Series {
	t.Helper()
	s, err := db.Query(context.Background(), engine.Query{Selector: engine.Selector{Measurement: measurement}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testLogOut is where subscribers log: stderr with -v.
func testLogOut() io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return io.Discard
}

// flushWatch is signalled after each batch a subscriber flushes.
type flushWatch struct {
	mu      sync.Mutex
	changed chan struct{}
}

func (f *flushWatch) signal() {
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

var watches sync.Map // *Subscriber -> *flushWatch

// waitStats waits until cond holds for the subscriber's stats.
func waitStats(t testing.TB, s *Subscriber, what string, cond func(Stats) bool) {
	t.Helper()
	v, _ := watches.Load(s)
	f := v.(*flushWatch)
	timeout := time.After(60 * time.Second)
	for {
		f.mu.Lock()
		ch := f.changed
		f.mu.Unlock()
		if st := s.Stats(); cond(st) {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("timed out waiting for %s; stats %+v", what, s.Stats())
		}
	}
}

// waitMessages waits until filter i handled n messages.
func waitMessages(t *testing.T, s *Subscriber, i int, n int64) {
	t.Helper()
	waitStats(t, s, fmt.Sprintf("%d messages on filter %d", n, i), func(st Stats) bool { return st.Filters[i].Messages >= n })
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}
