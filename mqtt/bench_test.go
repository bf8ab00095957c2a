package mqtt

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/mqtt/mosquittotest"
)

// benchThroughMosquitto publishes b.N messages made by payload at QoS 1 to
// a real Mosquitto and waits until the subscriber acknowledged them all
// (stored with SyncAlways). It reports messages/s and points/s. The
// publisher (benchpub_test.go) is several connections writing packets
// encoded beforehand with a window of unacknowledged messages each, so
// that the figure is the broker's and strata's: BenchmarkMosquittoPublish
// measures the same publisher with no subscriber.
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
	pubs := newBenchPublishers(b, broker.URL)
	packets := benchPackets(payload)
	b.ResetTimer()
	start := time.Now()
	publishAll(b, pubs, packets, b.N, benchWindow)
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
	benchThroughMosquitto(b, Subscription{Filter: "bench/#", Format: FormatJSON, JSON: m}, 1, jsonBenchPayload)
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

// Publisher shape of the benchmarks: connections and the unacknowledged
// messages each may have.
const (
	benchConns  = 4
	benchWindow = 500
)

func newBenchPublishers(b *testing.B, broker string) []*rawPublisher {
	pubs := make([]*rawPublisher, benchConns)
	for i := range pubs {
		pubs[i] = dialRawPublisher(b, broker, fmt.Sprintf("bench-pub-%d", i))
	}
	return pubs
}

// benchPackets encodes 1,000 messages made by payload, on 50 topics.
func benchPackets(payload func(i int) []byte) []pubPacket {
	packets := make([]pubPacket, 1000)
	for i := range packets {
		packets[i] = encodePublish(fmt.Sprintf("bench/dev%d/data", i%50), payload(i))
	}
	return packets
}

// BenchmarkMosquittoPublish: the benchmarks' publisher and the broker
// alone (the JSON messages of BenchmarkMosquittoJSON, no subscriber): the
// ceiling the publishing side puts on the figures above.
func BenchmarkMosquittoPublish(b *testing.B) {
	broker := mosquittotest.Start(b)
	pubs := newBenchPublishers(b, broker.URL)
	packets := benchPackets(jsonBenchPayload)
	b.ResetTimer()
	publishAll(b, pubs, packets, b.N, benchWindow)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// jsonBenchPayload is a JSON reading of 10 fields.
func jsonBenchPayload(i int) []byte {
	var sb strings.Builder
	fmt.Fprintf(&sb, `{"id":"s%d","ts":%d`, i%10, 1700000000000+int64(i))
	for f := range 10 {
		fmt.Fprintf(&sb, `,"f%d":%d.%d`, f, i%1000, f)
	}
	sb.WriteString("}")
	return []byte(sb.String())
}
