package forward_test

import (
	"log"
	"os"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/forward"
)

// A gateway keeps its local database and forwards what it stores to a
// central VictoriaMetrics (or Mimir, Thanos Receive, Cortex, Prometheus)
// over remote write.
func Example() {
	db, err := engine.Open("/var/lib/gateway/db", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	f, err := forward.New(db, forward.Options{ // before the first write
		URL:      "http://vminsert:8480/insert/0/prometheus/api/v1/write",
		Protocol: forward.Prometheus,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close() // before db.Close
	if err := f.Start(); err != nil {
		log.Fatal(err)
	}
	// ... db.Write, lineproto.Write, an HTTP server ...
	forward.WriteMetrics(os.Stdout, f.Stats().Metrics())
}
