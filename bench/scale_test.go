package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// slowStore is SQLite that stalls on the second batch it writes: an engine
// that cannot finish a size of more than one batch in time.
type slowStore struct {
	store
	stall   time.Duration
	batches int
}

func (s *slowStore) write(points []engine.Point) error {
	if s.batches++; s.batches == 2 {
		time.Sleep(s.stall) // the workload of a slow engine, not synchronisation
	}
	return s.store.write(points)
}

// TestRunScale sweeps three small sizes with every engine and one that is
// too slow for the second: it must be reported over the limit there and
// left out of the third, while the others run every size, cross-checked.
func TestRunScale(t *testing.T) {
	const limit = 3 * time.Second
	openers["slow"] = func(dir string, cfg Config, dur Durability) (store, error) {
		s, err := openSQLite(dir, cfg, dur)
		if err != nil {
			return nil, err
		}
		return &slowStore{store: s, stall: limit + limit/5}, nil
	}
	t.Cleanup(func() { delete(openers, "slow") })
	engines := append(testEngines(t), "slow")
	sizes := []ScaleSize{{1000, 10}, {4000, 20}, {8000, 40}}
	rep, err := RunScale(context.Background(), ScaleOptions{Kind: ScaleSeries, Sizes: sizes, Engines: engines,
		Batch: 1000, Limit: limit, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range rep.Results {
		count[r.Engine]++
		switch {
		case r.Engine == "slow" && r.Devices == 20:
			if r.Status != ScaleOverLimit {
				t.Errorf("slow at size 2: %+v", r)
			}
		case r.Status != ScaleOK || r.PointsPerSec <= 0 || r.PointQueryMs == nil:
			t.Errorf("%s at %d points: %+v", r.Engine, r.Points, r)
		}
	}
	for _, e := range engines {
		if want := map[bool]int{true: 2, false: 3}[e == "slow"]; count[e] != want {
			t.Errorf("%s: %d results, want %d", e, count[e], want)
		}
	}
	var md, cs, svg bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| slow | 4,000 | 20 | over limit |") {
		t.Errorf("markdown:\n%s", md.String())
	}
	if err := rep.WriteCSV(&cs); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&cs).ReadAll()
	if err != nil || len(recs) != 1+len(rep.Results) {
		t.Fatalf("CSV: %v %v", recs, err)
	}
	if err := rep.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"points/s", "bytes/point", "peak RSS (MiB)", "(log scale)", "memlimit (in memory)", "series (10 points"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if _, err := RunScale(context.Background(), ScaleOptions{Kind: "bytes"}); err == nil {
		t.Error("unknown kind accepted")
	}
}

func TestDefaultScaleSizes(t *testing.T) {
	for kind, want := range map[ScaleKind][]ScaleSize{
		ScalePoints: {{1e6, 1e3}, {1e7, 1e3}, {1e8, 1e3}},
		ScaleSeries: {{1e4, 1e3}, {1e5, 1e4}, {1e6, 1e5}, {3e6, 1e6}},
	} {
		got := DefaultScaleSizes(kind)
		if len(got) != len(want) {
			t.Fatalf("%s: %v", kind, got)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: %v, want %v", kind, got, want)
			}
		}
	}
}
