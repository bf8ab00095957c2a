package mqtt

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

func TestTopicMatch(t *testing.T) {
	f := func(filter, topic string, want bool) {
		t.Helper()
		if got := topicMatch(filter, topic); got != want {
			t.Errorf("topicMatch(%q, %q) = %v, want %v", filter, topic, got, want)
		}
	}
	f("plant/#", "plant/a/b", true)
	f("plant/#", "plant", true)
	f("plant/#", "plantx/a", false)
	f("plant/+/temp", "plant/a/temp", true)
	f("plant/+/temp", "plant/a/b/temp", false)
	f("plant/+", "plant", false)
	f("plant/+", "plant/", true)
	f("#", "a/b", true)
	f("#", "$SYS/x", false)
	f("+/x", "$SYS/x", false)
	f("$SYS/#", "$SYS/x", true)
	f("a/b", "a/b", true)
	f("a/b", "a/b/c", false)
	f("a/b/c", "a/b", false)
}

func TestValidFilter(t *testing.T) {
	for _, ok := range []string{"a", "a/#", "+/b/+", "#", "$share/g/a/#"} {
		if err := validFilter(ok); err != nil {
			t.Errorf("validFilter(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a/#/b", "a/b#", "a+/b", "$share/g/"} {
		if err := validFilter(bad); err == nil {
			t.Errorf("validFilter(%q) = nil", bad)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	db := openDB(t)
	good := Options{Brokers: []string{"tcp://127.0.0.1:1"}, ClientID: "c", Subscriptions: []Subscription{{Filter: "a/#"}}}
	if _, err := New(db, &good); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(o *Options){
		"no broker":    func(o *Options) { o.Brokers = nil },
		"no client id": func(o *Options) { o.ClientID = "" },
		"no filter":    func(o *Options) { o.Subscriptions = nil },
		"bad filter":   func(o *Options) { o.Subscriptions = []Subscription{{Filter: "a/#/b"}} },
		"bad format":   func(o *Options) { o.Subscriptions = []Subscription{{Filter: "a", Format: 9}} },
		"bad unit": func(o *Options) {
			o.Subscriptions = []Subscription{{Filter: "a", Format: FormatJSON, JSON: &JSONMapping{TimeUnit: "h"}}}
		},
	} {
		o := good
		mod(&o)
		if _, err := New(db, &o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: err = %v, want ErrInvalidOptions", name, err)
		}
	}
}

// TestLineProtocolOverMQTT stores several lines per message from several
// filters with their own formats, counts a bad message and acknowledges it.
func TestLineProtocolOverMQTT(t *testing.T) {
	_, broker := startMochi(t)
	db := openDB(t)
	w := newNotifyWriter(db)
	s, _ := runSubscriber(t, w, Options{Brokers: []string{broker}, ClientID: "strata-lp", Subscriptions: []Subscription{
		{Filter: "plant/lp/#", Format: FormatLineProtocol},
		{Filter: "plant/json/+", Format: FormatJSON, JSON: &JSONMapping{Measurement: "env", TopicTags: map[int]string{3: "room"}}},
	}})
	waitSubscribed(t, s)
	pub := publisher(t, broker, "pub-lp")
	publish(t, pub, "plant/lp/a", []byte("cpu,host=a v=1 1000\ncpu,host=a v=2 2000\n\ncpu,host=b v=3 1000"))
	publish(t, pub, "plant/lp/b", []byte("this is not line protocol"))
	publish(t, pub, "plant/lp/c", []byte("cpu,host=c v=4 1000\ncpu,host=c v= 2000"))
	publish(t, pub, "plant/json/r1", []byte(`{"temp":21.5}`))
	waitMessages(t, s, 0, 3)
	waitMessages(t, s, 1, 1)

	series := queryAll(t, db, "cpu")
	got := map[string]int{}
	for _, se := range series {
		got[se.Tags[0].Value] = len(se.Samples)
	}
	if fmt.Sprint(got) != "map[a:2 b:1 c:1]" {
		t.Errorf("cpu samples per host = %v", got)
	}
	env := queryAll(t, db, "env")
	if len(env) != 1 || env[0].Tags[0] != (engine.Tag{Key: "room", Value: "r1"}) || env[0].Samples[0].Value.Float() != 21.5 {
		t.Errorf("env = %+v", env)
	}
	st := s.Stats()
	lp, js := st.Filters[0], st.Filters[1]
	if lp.Messages != 3 || lp.Points != 4 || lp.Failures != 2 {
		t.Errorf("lp stats = %+v, want 3 messages, 4 points, 2 failures", lp)
	}
	if js.Messages != 1 || js.Points != 1 || js.Failures != 0 || js.Format != FormatJSON {
		t.Errorf("json stats = %+v", js)
	}
	var names []string
	for _, m := range st.Metrics() {
		names = append(names, m.Name+fmt.Sprint(m.Labels))
	}
	all := strings.Join(names, "\n")
	for _, want := range []string{"strata_mqtt_messages_total[filter plant/lp/# format lp]", "strata_mqtt_reconnects_total[]", "strata_mqtt_lag_seconds[filter plant/json/+ format json]"} {
		if !strings.Contains(all, want) {
			t.Errorf("metrics lack %s:\n%s", want, all)
		}
	}
}

// TestUnwrittenMessageRedelivered: a message whose Write fails is not
// acknowledged, so the broker delivers it again to the next session of the
// same client id; one that was written is not delivered again.
func TestUnwrittenMessageRedelivered(t *testing.T) {
	_, broker := startMochi(t)
	db := openDB(t)
	w := newNotifyWriter(db)
	opts := Options{Brokers: []string{broker}, ClientID: "strata-redeliver", Subscriptions: []Subscription{{Filter: "r/#"}}}
	s, stop := runSubscriber(t, w, opts)
	waitSubscribed(t, s)
	pub := publisher(t, broker, "pub-r")
	publish(t, pub, "r/1", []byte("m v=1 1"))
	waitMessages(t, s, 0, 1)

	w.setFail(errors.New("disk on fire"))
	publish(t, pub, "r/1", []byte("m v=2 2"))
	w.waitFor(t, "a failed write", func(w *notifyWriter) bool { return w.writes >= 3 })
	stop()
	if n := s.Stats().Filters[0].Messages; n != 1 {
		t.Fatalf("messages acknowledged = %d, want 1", n)
	}

	w.setFail(nil)
	s2, _ := runSubscriber(t, w, opts)
	w.waitPoints(t, 2)
	publish(t, pub, "r/1", []byte("m v=3 3"))
	waitMessages(t, s2, 0, 2)
	if st := s2.Stats().Filters[0]; st.Messages != 2 || st.Points != 2 {
		t.Errorf("second session stats = %+v, want the unwritten message and the new one only", st)
	}
	se := queryAll(t, db, "m")
	if len(se) != 1 || len(se[0].Samples) != 3 {
		t.Fatalf("stored = %+v", se)
	}
}

// TestRefusedPointDropped: a point the database refuses (a field type
// conflict) fails its message alone; the other messages of the batch are
// stored.
func TestRefusedPointDropped(t *testing.T) {
	db := openDB(t)
	if err := db.Write([]engine.Point{{Measurement: "m", Fields: []engine.Field{{Key: "v", Value: engine.Float(1)}}, Time: 1}}); err != nil {
		t.Fatal(err)
	}
	s, err := New(db, &Options{Brokers: []string{"tcp://127.0.0.1:1"}, ClientID: "x", Subscriptions: []Subscription{{Filter: "#"}}})
	if err != nil {
		t.Fatal(err)
	}
	var batch []inbound
	for i, payload := range []string{"m v=2 2", `m v="text" 3`, "m v=4 4", "m v=5i 5", "n v=1 1"} {
		batch = append(batch, inbound{msg: &fakeMessage{topic: "t", payload: []byte(payload)}, recv: s.opts.Now()})
		_ = i
	}
	if err := s.flush(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	for i, m := range batch {
		if !m.msg.(*fakeMessage).acked {
			t.Errorf("message %d not acknowledged", i)
		}
	}
	st := s.Stats().Filters[0]
	if st.Messages != 5 || st.Failures != 2 || st.Points != 3 || st.DroppedPoints != 2 {
		t.Errorf("stats = %+v, want 5 messages, 2 failures, 3 points, 2 dropped", st)
	}
	if se := queryAll(t, db, "m"); len(se) != 1 || len(se[0].Samples) != 3 {
		t.Errorf("m = %+v", se)
	}
}

// fakeMessage is a paho.Message that records its acknowledgement.
type fakeMessage struct {
	topic   string
	payload []byte
	acked   bool
}

func (m *fakeMessage) Duplicate() bool   { return false }
func (m *fakeMessage) Qos() byte         { return 1 }
func (m *fakeMessage) Retained() bool    { return false }
func (m *fakeMessage) Topic() string     { return m.topic }
func (m *fakeMessage) MessageID() uint16 { return 1 }
func (m *fakeMessage) Payload() []byte   { return m.payload }
func (m *fakeMessage) Ack()              { m.acked = true }

// TestStopWithFullQueue: Run returns when its context ends even while
// paho's handler waits on a full queue and the writer keeps failing.
func TestStopWithFullQueue(t *testing.T) {
	_, broker := startMochi(t)
	w := newNotifyWriter(openDB(t))
	w.setFail(errors.New("disk on fire"))
	s, stop := runSubscriber(t, w, Options{Brokers: []string{broker}, ClientID: "strata-full", QueueMessages: 1, MaxBatchMessages: 1,
		Subscriptions: []Subscription{{Filter: "f/#"}}})
	waitSubscribed(t, s)
	pub := publisher(t, broker, "pub-full")
	for i := range 5 {
		publish(t, pub, "f/x", []byte(fmt.Sprintf("m v=%d %d", i, i)))
	}
	w.waitFor(t, "a failed write", func(w *notifyWriter) bool { return w.writes >= 2 })
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
	}
	if n := s.Stats().Filters[0].Messages; n != 0 {
		t.Errorf("%d messages acknowledged though none was written", n)
	}
}
