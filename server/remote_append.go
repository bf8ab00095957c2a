package server

import (
	"errors"
	"fmt"
	"math"

	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/point"
)

// appendRemote stores the samples of req as storeRemote does, through an
// appender: each time series is resolved once, by its labels, and its
// other samples go by the ref that returned, with one Commit per
// remoteBatch samples. A series the engine refuses is left out whole (its
// samples of the pending batch are taken back) and named in rejected. A
// Commit refused because another writer gave one of the series another
// kind meanwhile hands the request to storeRemote, which names the
// refused series (rewriting samples already stored changes nothing).
func (s *Server) appendRemote(req *prompb.WriteRequest) (rejected []string, err error) {
	app := s.db.SampleAppender()
	defer app.Rollback()
	committed := 0
	commit := func() error {
		n := app.Pending()
		if n == 0 {
			return nil
		}
		if err := app.Commit(); err != nil {
			return err
		}
		committed += n
		s.metrics.remoteSamples.Add(float64(n))
		return nil
	}
	refusal := func(err error) bool {
		return errors.Is(err, engine.ErrInvalid) || errors.Is(err, engine.ErrFieldTypeConflict)
	}
	for i := range req.Timeseries {
		ts := &req.Timeseries[i]
		name, tags, err := remoteTags(ts.Labels)
		if err != nil {
			rejected = append(rejected, fmt.Sprintf("series %s: %v", seriesName(ts), err))
			continue
		}
		var ref engine.SeriesRef
		mark := app.Pending()
		for _, smp := range ts.Samples {
			v := smp.Value
			if math.IsNaN(v) || math.IsInf(v, 0) {
				if value.IsStaleNaN(v) {
					s.metrics.remoteSkipped.WithLabelValues("stale").Inc()
				} else {
					s.metrics.remoteNonFinite.Inc()
				}
				continue
			}
			if smp.Timestamp > math.MaxInt64/msNanos || smp.Timestamp < math.MinInt64/msNanos {
				rejected = append(rejected, fmt.Sprintf("series %s: timestamp %d ms out of range", seriesName(ts), smp.Timestamp))
				continue
			}
			if app.Pending() >= remoteBatch {
				if err := commit(); err != nil {
					return s.remoteFallback(req, rejected, err)
				}
				mark = 0
			}
			r, err := app.Append(ref, name, tags, "value", smp.Timestamp*msNanos, engine.Float(v))
			if err != nil && app.Pending() > 0 && isBatchFull(err) {
				if err := commit(); err != nil {
					return s.remoteFallback(req, rejected, err)
				}
				mark = 0
				r, err = app.Append(ref, name, tags, "value", smp.Timestamp*msNanos, engine.Float(v))
			}
			if err != nil {
				if !refusal(err) {
					return rejected, err
				}
				// Drop every sample of the refused series: they share its fault.
				app.Truncate(mark)
				rejected = append(rejected, fmt.Sprintf("series %s: %v", seriesName(ts), err))
				break
			}
			ref = r
		}
	}
	if err := commit(); err != nil {
		return s.remoteFallback(req, rejected, err)
	}
	return rejected, nil
}

// remoteFallback handles a failed Commit of appendRemote: a refusal (a
// series whose kind another writer changed meanwhile) has storeRemote
// write the request again and name it; anything else is a failure.
func (s *Server) remoteFallback(req *prompb.WriteRequest, rejected []string, err error) ([]string, error) {
	var pe *engine.PointError
	if !errors.As(err, &pe) {
		return rejected, err
	}
	return s.storeRemote(req)
}

// isBatchFull reports whether err is an appender's refusal of a sample
// that would take its pending batch past MaxWriteBytes.
func isBatchFull(err error) bool { return errors.Is(err, point.ErrBatchFull) }
