package engine_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stratadb/strata/engine"
)

// Aggregates, per series and grouped, against the reference model on the
// seeded workload of contract_model_test.go: every Agg, bucket widths, group keys that some
// or all series lack, numeric kinds mixed in one field, deletes,
// overwrites and retention, in every state.

var cmGroupBys = [][]string{nil, {}, {"a"}, {"a", "b"}, {"nope"}, {"c", "a"}, {"b", "nope"}, {"aZ", "a b"}}

func TestContractModelAggregates(t *testing.T) {
	for seed := range uint64(3) {
		var now, retention int64
		opts := cOpts(0)
		if seed%2 == 1 {
			now, retention = 1000, 1020
			opts = cOpts(now)
			opts.Retention = time.Duration(retention)
		}
		steps, model := cmWorkload(seed+100, now, retention, cmLimits{})
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			inStates(t, opts, steps, func(t *testing.T, db *engine.DB) {
				r := rand.New(rand.NewPCG(seed, 5))
				for range 150 {
					q := engine.Query{
						Selector: cmSelector(r, true),
						Agg:      engine.Aggregate(1 + r.IntN(7)),
						Every:    []int64{0, 0, 7, 20, 1}[r.IntN(5)],
						GroupBy:  cmGroupBys[r.IntN(len(cmGroupBys))],
					}
					got := cFmt(cQuery(t, db, q))
					if want := cFmt(model.Query(q)); got != want {
						t.Errorf("Query %+v:\ngot:\n%swant:\n%s", q, got, want)
					}
				}
			})
		})
	}
}
