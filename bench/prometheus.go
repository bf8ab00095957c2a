package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/stratadb/strata/engine"
)

// promStore writes into Prometheus' TSDB through its head appender, one
// Appender and one Commit per batch, with the series references the
// appender returned cached per series (found through the seriesIndex, as
// LevelDB's and Pebble's ids are), as a scraper does.
//
// A series is labelled __name__ = measurement_field (how InfluxDB's
// Prometheus compatibility names a field) plus one label per tag. Times
// are milliseconds, Prometheus' resolution: a time that is not a whole
// millisecond is refused rather than rounded.
//
// The TSDB appends to its WAL on Commit and fsyncs it when a 128 MiB
// segment fills and on Close, never per commit: it is run in the fast
// column only. It has no memory budget to match the others' 64 MiB (its
// head keeps the last 1.5 block ranges, 3 hours of samples, in memory by
// design), so equal-memory runs it with its defaults.
type promStore struct {
	db   *tsdb.DB
	reg  *prometheus.Registry
	idx  seriesIndex
	refs []storage.SeriesRef // refs[id-1]
	lb   labels.ScratchBuilder
	name []byte
}

func openPrometheus(dir string, _ Config, _ Durability) (store, error) {
	opts := tsdb.DefaultOptions()
	// The dataset lies in the past: keep every sample whatever its age.
	opts.RetentionDuration = 0
	reg := prometheus.NewRegistry()
	db, err := tsdb.Open(dir, slog.New(slog.NewTextHandler(io.Discard, nil)), reg, opts, nil)
	if err != nil {
		return nil, err
	}
	return &promStore{db: db, reg: reg, lb: labels.NewScratchBuilder(4)}, nil
}

// promName is the metric name of a field.
func promName(dst []byte, measurement, field string) []byte {
	dst = append(dst, measurement...)
	dst = append(dst, '_')
	return append(dst, field...)
}

func (s *promStore) write(points []engine.Point) (err error) {
	app := s.db.Appender(context.Background())
	base := s.idx.count()
	defer func() {
		if err != nil {
			app.Rollback()
			// The references of the batch's new series were never committed.
			s.idx.truncate(base)
			s.refs = s.refs[:base]
		}
	}()
	for i := range points {
		p := &points[i]
		if p.Time%int64(time.Millisecond) != 0 {
			return fmt.Errorf("bench: prometheus stores milliseconds: time %d is not a whole millisecond", p.Time)
		}
		ms := p.Time / int64(time.Millisecond)
		set := s.idx.set(p)
		for f := range p.Fields {
			v, err := floatValue(p, f)
			if err != nil {
				return err
			}
			id, added := s.idx.field(set, p, f)
			if !added {
				if _, err := app.Append(s.refs[id-1], labels.EmptyLabels(), ms, v); err != nil {
					return err
				}
				continue
			}
			s.lb.Reset()
			s.name = promName(s.name[:0], p.Measurement, p.Fields[f].Key)
			s.lb.Add(labels.MetricName, string(s.name))
			for _, t := range p.Tags {
				s.lb.Add(t.Key, t.Value)
			}
			s.lb.Sort()
			ref, err := app.Append(0, s.lb.Labels(), ms, v)
			if err != nil {
				return err
			}
			s.refs = append(s.refs, ref)
		}
	}
	return app.Commit()
}

// query answers q with the TSDB's querier: equality matchers for the metric
// name and tags, a regular expression on the name when any field is
// selected; means are computed in Go, as for LevelDB and Pebble.
func (s *promStore) query(ctx context.Context, q engine.Query, rs *resultSet) error {
	ans, err := newAnswer(&q, rs)
	if err != nil {
		return err
	}
	if q.End <= q.Start {
		return nil
	}
	ms := int64(time.Millisecond)
	mint, maxt := ceilDiv(q.Start, ms), ceilDiv(q.End, ms)-1
	var matchers []*labels.Matcher
	if q.Field != "" {
		matchers = append(matchers, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, string(promName(nil, q.Measurement, q.Field))))
	} else {
		matchers = append(matchers, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, regexp.QuoteMeta(q.Measurement+"_")+".+"))
	}
	for _, t := range q.Tags {
		matchers = append(matchers, labels.MustNewMatcher(labels.MatchEqual, t.Key, t.Value))
	}
	qr, err := s.db.Querier(mint, maxt)
	if err != nil {
		return err
	}
	set := qr.Select(ctx, false, nil, matchers...)
	var it chunkenc.Iterator
	var tags []engine.Tag
	for set.Next() {
		sr := set.At()
		var name string
		tags = tags[:0]
		sr.Labels().Range(func(l labels.Label) {
			if l.Name == labels.MetricName {
				name = l.Value
			} else {
				tags = append(tags, engine.Tag{Key: l.Name, Value: l.Value})
			}
		})
		field, ok := strings.CutPrefix(name, q.Measurement+"_")
		if !ok {
			return errors.Join(fmt.Errorf("bench: prometheus returned metric %q for measurement %q", name, q.Measurement), qr.Close())
		}
		slices.SortFunc(tags, cmpTag)
		// The digest does not depend on the order of series, which the
		// querier sorts by labels.
		ans.series(engine.SeriesKey(q.Measurement, tags, field))
		it = sr.Iterator(it)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			if vt != chunkenc.ValFloat {
				return errors.Join(fmt.Errorf("bench: prometheus returned a %v sample", vt), qr.Close())
			}
			tms, v := it.At()
			t := tms * ms
			if t < q.Start || t >= q.End {
				continue
			}
			ans.add(t, v)
		}
		if err := it.Err(); err != nil {
			return errors.Join(err, qr.Close())
		}
	}
	ans.flush()
	if err := set.Err(); err != nil {
		return errors.Join(err, qr.Close())
	}
	return qr.Close()
}

// compactions returns the number of compactions the TSDB ran, from its
// prometheus_tsdb_compactions_total counter.
func (s *promStore) compactions() (int64, bool) {
	mfs, err := s.reg.Gather()
	if err != nil {
		return 0, false
	}
	for _, mf := range mfs {
		if mf.GetName() == "prometheus_tsdb_compactions_total" && len(mf.GetMetric()) > 0 {
			return int64(math.Round(mf.GetMetric()[0].GetCounter().GetValue())), true
		}
	}
	return 0, false
}

func (s *promStore) close() error { return s.db.Close() }
