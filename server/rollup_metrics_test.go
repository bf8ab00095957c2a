package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/stratadb/strata/engine"
)

// TestRollupMetrics writes three hours of 10 s samples over HTTP to a
// database that rolls up to 1m after 1h, compacts, and reads the rollup
// counters and levels from /metrics: the two oldest hours (720 samples)
// became 120 one-minute buckets that end where the rule's bound is.
func TestRollupMetrics(t *testing.T) {
	base := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	ts := newTestServerDB(t, &engine.Options{
		Sync:                        engine.SyncNever,
		DisableBackgroundCompaction: true,
		Now:                         func() time.Time { return base },
		Rollups:                     []engine.RollupRule{{Measurement: "temp", Every: time.Minute, After: time.Hour}},
	}, nil)
	var body strings.Builder
	for tm := base.Add(-3 * time.Hour); tm.Before(base); tm = tm.Add(10 * time.Second) {
		fmt.Fprintf(&body, "temp,room=a v=%d %d\n", tm.Unix()%97, tm.UnixNano())
	}
	if code, _, msg := ts.do("POST", "/api/v2/write?precision=ns", []byte(body.String())); code != 204 {
		t.Fatalf("write: %d %s", code, msg)
	}
	if err := ts.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := ts.db.Compact(); err != nil {
		t.Fatal(err)
	}
	code, _, text := ts.do("GET", "/metrics", nil)
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string, lbls ...string) float64 {
		t.Helper()
		fam, ok := fams[name]
		if !ok {
			t.Fatalf("no %s:\n%s", name, grepLines(text, "rollup"))
		}
	metrics:
		for _, m := range fam.Metric {
			for i := 0; i+1 < len(lbls); i += 2 {
				if labelValue(m, lbls[i]) != lbls[i+1] {
					continue metrics
				}
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
		t.Fatalf("no %s%v:\n%s", name, lbls, grepLines(text, "rollup"))
		return 0
	}
	end := float64(base.Add(-time.Hour).Unix())
	for _, c := range []struct {
		name string
		lbls []string
		want float64
	}{
		{"strata_rollup_compactions_total", nil, 1},
		{"strata_rollup_samples_total", nil, 720},
		{"strata_rollup_buckets_written_total", nil, 120},
		{"strata_rollup_buckets_cascaded_total", nil, 0},
		{"strata_rollup_buckets", []string{"every", "1m"}, 120},
		{"strata_rollup_end_timestamp_seconds", []string{"every", "1m"}, end},
	} {
		if got := value(c.name, c.lbls...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.lbls, got, c.want)
		}
	}
	// And the engine says the same.
	st := ts.db.Stats()
	if st.SamplesRolledUp != 720 || len(st.RollupLevels) != 1 || st.RollupLevels[0].End != base.Add(-time.Hour).UnixNano() {
		t.Fatalf("stats: %d samples rolled up, levels %+v", st.SamplesRolledUp, st.RollupLevels)
	}
}

func TestEveryLabel(t *testing.T) {
	f := func(d time.Duration, want string) {
		t.Helper()
		if got := everyLabel(d); got != want {
			t.Errorf("everyLabel(%v) = %q, want %q", d, got, want)
		}
	}
	f(time.Minute, "1m")
	f(90*time.Second, "90s")
	f(24*time.Hour, "24h")
	f(90*time.Minute, "90m")
	f(1500*time.Millisecond, "1.5s")
}
