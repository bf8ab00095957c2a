package mqtt

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
)

// BenchmarkFlushJSON: the subscriber's batch path without a broker:
// batches of 1,024 JSON messages of 10 fields (50 devices x 10 ids)
// decoded and stored, by the appender (engine.DB) or by Write (a Writer
// without an appender), over a SyncNever database.
func BenchmarkFlushJSON(b *testing.B) {
	for _, path := range []string{"appender", "write"} {
		b.Run(path, func(b *testing.B) {
			db, err := engine.Open(b.TempDir(), &engine.Options{Sync: engine.SyncNever, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			var w Writer = db
			if path == "write" {
				w = writeOnly{db}
			}
			m := &JSONMapping{Measurement: "sensor", Time: "ts", TimeUnit: "ms", Tags: []string{"id"}, TopicTags: map[int]string{2: "device"}}
			s, err := New(w, &Options{Brokers: []string{"tcp://127.0.0.1:1"}, ClientID: "x",
				Subscriptions: []Subscription{{Filter: "bench/#", Format: FormatJSON, JSON: m}}})
			if err != nil {
				b.Fatal(err)
			}
			const batchLen, nBatches = 1024, 16
			batches := make([][]inbound, nBatches)
			n := 0
			for k := range batches {
				msgs := make([]fakeMessage, batchLen)
				batches[k] = make([]inbound, batchLen)
				for i := range msgs {
					var sb strings.Builder
					fmt.Fprintf(&sb, `{"id":"s%d","ts":%d`, n%10, 1700000000000+int64(n))
					for f := range 10 {
						fmt.Fprintf(&sb, `,"f%d":%d.%d`, f, n%1000, f)
					}
					sb.WriteString("}")
					msgs[i] = fakeMessage{topic: fmt.Sprintf("bench/dev%d/data", n%50), payload: []byte(sb.String())}
					batches[k][i] = inbound{msg: &msgs[i]}
					n++
				}
			}
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				if err := s.flush(b.Context(), batches[k%nBatches]); err != nil {
					b.Fatal(err)
				}
				k++
			}
			b.ReportMetric(float64(k*batchLen)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// writeOnly hides the engine's appender.
type writeOnly struct{ db *engine.DB }

func (w writeOnly) Write(points []engine.Point) error { return w.db.Write(points) }
