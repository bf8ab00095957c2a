package mqtt

import (
	"fmt"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/stratadb/strata/mqtt/mosquittotest"
)

// benchThroughMosquitto publishes b.N messages made by payload at QoS 1 to
// a real Mosquitto and waits until the subscriber acknowledged them all
// (stored with SyncAlways). It reports messages/s and points/s.
func benchThroughMosquitto(b *testing.B, sub Subscription, pointsPerMsg int, payload func(i int) []byte) {
	broker := mosquittotest.Start(b)
	db := openDB(b)
	s, err := New(db, &Options{Brokers: []string{broker.URL}, ClientID: "strata-bench", Subscriptions: []Subscription{sub}})
	if err != nil {
		b.Fatal(err)
	}
	flushes := &flushWatch{changed: make(chan struct{})}
	s.afterFlush = flushes.signal
	watches.Store(s, flushes)
	ctx, cancel := contextWithCancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-s.Ready():
	case <-time.After(30 * time.Second):
		b.Fatal("not subscribed")
	}
	// Two publishers, so that the publishing side is not the limit.
	const pubs = 2
	clients := make([]paho.Client, pubs)
	for i := range clients {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL).SetClientID(fmt.Sprintf("bench-pub-%d", i)).SetCleanSession(true))
		if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			b.Fatal(tok.Error())
		}
		defer c.Disconnect(100)
		clients[i] = c
	}
	payloads := make([][]byte, 1000)
	for i := range payloads {
		payloads[i] = payload(i)
	}
	b.ResetTimer()
	start := time.Now()
	errc := make(chan error, pubs)
	for p := range pubs {
		go func(c paho.Client) {
			var toks []paho.Token
			for i := p; i < b.N; i += pubs {
				toks = append(toks, c.Publish(fmt.Sprintf("bench/dev%d/data", i%50), 1, false, payloads[i%len(payloads)]))
				if len(toks) == 1000 {
					for _, t := range toks {
						t.Wait()
					}
					toks = toks[:0]
				}
			}
			for _, t := range toks {
				t.Wait()
			}
			errc <- nil
		}(clients[p])
	}
	for range pubs {
		<-errc
	}
	pubDone := time.Since(start).Seconds()
	waitStats(b, s, "all messages", func(st Stats) bool { return st.Filters[0].Messages >= int64(b.N) })
	el := time.Since(start).Seconds()
	b.StopTimer()
	st := s.Stats().Filters[0]
	if st.Failures != 0 || st.Points != int64(b.N*pointsPerMsg) {
		b.Fatalf("stats %+v", st)
	}
	b.ReportMetric(pubDone, "s-publishing")
	b.ReportMetric(el, "s-total")
	b.ReportMetric(float64(b.N)/el, "msgs/s")
	b.ReportMetric(float64(b.N*pointsPerMsg)/el, "points/s")
}

// BenchmarkMosquittoJSON: JSON messages of 10 fields.
func BenchmarkMosquittoJSON(b *testing.B) {
	m := &JSONMapping{Measurement: "sensor", Time: "ts", TimeUnit: "ms", Tags: []string{"id"}, TopicTags: map[int]string{2: "device"}}
	benchThroughMosquitto(b, Subscription{Filter: "bench/#", Format: FormatJSON, JSON: m}, 1, func(i int) []byte {
		var sb strings.Builder
		fmt.Fprintf(&sb, `{"id":"s%d","ts":%d`, i%10, 1700000000000+int64(i))
		for f := range 10 {
			fmt.Fprintf(&sb, `,"f%d":%d.%d`, f, i%1000, f)
		}
		sb.WriteString("}")
		return []byte(sb.String())
	})
}

// BenchmarkMosquittoLineProtocol: 100 lines per message.
func BenchmarkMosquittoLineProtocol(b *testing.B) {
	const lines = 100
	benchThroughMosquitto(b, Subscription{Filter: "bench/#", Format: FormatLineProtocol}, lines, func(i int) []byte {
		var sb strings.Builder
		for l := range lines {
			fmt.Fprintf(&sb, "machine,line=L%d,cell=c%d temp=%d.5 %d\n", l%4, l, i%100, 1700000000000000000+int64(i)*lines+int64(l))
		}
		return []byte(sb.String())
	})
}
