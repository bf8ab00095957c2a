package mqtt

import (
	"fmt"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/stratadb/strata/mqtt/mosquittotest"
)

// publishRange publishes "m,phase=P v=I I" for i in [from, to) at QoS 1
// and waits for the broker to accept each.
func publishRange(t *testing.T, c paho.Client, phase string, from, to int) {
	t.Helper()
	var toks []paho.Token
	for i := from; i < to; i++ {
		toks = append(toks, c.Publish("plant/m", 1, false, fmt.Sprintf("m,phase=%s v=%d %d", phase, i, i)))
	}
	for i, tok := range toks {
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %d: %v", from+i, tok.Error())
		}
	}
}

// TestMosquittoBrokerRestart runs against a real Mosquitto with
// persistence: the subscriber reconnects by itself through a broker
// restart, and messages queued for its persistent session while it was
// offline survive a restart of the broker and are delivered when it comes
// back.
func TestMosquittoBrokerRestart(t *testing.T) {
	b := mosquittotest.Start(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mosquitto log:\n%s", b.Log())
		}
	})
	db := openDB(t)
	opts := Options{Brokers: []string{b.URL}, ClientID: "strata-restart", MaxReconnectInterval: 200 * time.Millisecond,
		Subscriptions: []Subscription{{Filter: "plant/#"}}}
	s, stop := runSubscriber(t, db, opts)
	waitSubscribed(t, s)

	pubOpts := func() *paho.ClientOptions {
		return paho.NewClientOptions().AddBroker(b.URL).SetClientID("pub-restart").SetCleanSession(true)
	}
	connect := func() paho.Client {
		c := paho.NewClient(pubOpts())
		if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publisher connect: %v", tok.Error())
		}
		return c
	}

	// Phase 1: the subscriber stays up while the broker restarts.
	pub := connect()
	publishRange(t, pub, "one", 0, 500)
	pub.Disconnect(100)
	b.Stop()
	b.Restart()
	pub = connect()
	publishRange(t, pub, "one", 500, 1000)
	waitStats(t, s, "1000 messages", func(st Stats) bool { return st.Filters[0].Messages >= 1000 })
	if st := s.Stats(); st.Reconnects < 1 {
		t.Errorf("reconnects = %d, want at least 1", st.Reconnects)
	}
	stop()

	// Phase 2: published while strata is away, kept by the broker across
	// its restart, delivered to the same client id.
	publishRange(t, pub, "two", 0, 700)
	pub.Disconnect(100)
	b.Stop()
	b.Restart()
	s2, _ := runSubscriber(t, db, opts)
	// The broker may also deliver again messages of phase one that the
	// first subscriber had not acknowledged when it stopped: they count
	// among s2's messages, so wait for phase two's samples themselves.
	waitStats(t, s2, "700 samples of phase two", func(Stats) bool {
		for _, se := range queryAll(t, db, "m") {
			if se.Tags[0].Value == "two" {
				return len(se.Samples) >= 700
			}
		}
		return false
	})

	for _, se := range queryAll(t, db, "m") {
		want := map[string]int{"one": 1000, "two": 700}[se.Tags[0].Value]
		if len(se.Samples) != want {
			t.Errorf("phase %s: %d samples, want %d", se.Tags[0].Value, len(se.Samples), want)
		}
		for i, x := range se.Samples {
			if x.Time != int64(i) || x.Value.Float() != float64(i) {
				t.Fatalf("phase %s sample %d = %+v", se.Tags[0].Value, i, x)
			}
		}
	}
	if n := len(queryAll(t, db, "m")); n != 2 {
		t.Errorf("%d series, want 2", n)
	}
}
