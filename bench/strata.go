package bench

import (
	"context"

	"github.com/stratadb/strata/engine"
)

// strataStore writes through the public engine API, the path users call.
type strataStore struct{ db *engine.DB }

// strataOptions returns strata's options for a configuration and
// durability.
func strataOptions(cfg Config, dur Durability) *engine.Options {
	opts := &engine.Options{Sync: engine.SyncNever}
	if dur == Durable {
		opts.Sync = engine.SyncAlways
	}
	if cfg == ConfigEqualMemory {
		opts.MemTableBytes = equalMemory
	}
	return opts
}

func openStrata(dir string, cfg Config, dur Durability) (store, error) {
	db, err := engine.Open(dir, strataOptions(cfg, dur))
	if err != nil {
		return nil, err
	}
	return &strataStore{db}, nil
}

func (s *strataStore) write(points []engine.Point) error { return s.db.Write(points) }

func (s *strataStore) query(ctx context.Context, q engine.Query, rs *resultSet) error {
	res, err := s.db.Query(ctx, q)
	if err != nil {
		return err
	}
	for i := range res {
		sr := &res[i]
		id := rs.series(engine.SeriesKey(sr.Measurement, sr.Tags, sr.Field))
		for _, smp := range sr.Samples {
			// A value of another kind reads as 0 and fails the check.
			rs.add(id, smp.Time, smp.Value.Float())
		}
	}
	return nil
}

func (s *strataStore) close() error { return s.db.Close() }

// compactions returns the compactions strata ran, from its Stats.
func (s *strataStore) compactions() (int64, bool) { return s.db.Stats().Compactions, true }

// writeStalls returns the writes strata stalled or slowed to let a flush
// or compaction catch up, from its Stats.
func (s *strataStore) writeStalls() int64 {
	st := s.db.Stats()
	return st.WriteStalls + st.WriteSlowdowns
}
