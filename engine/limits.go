package engine

import "fmt"

// seriesLimiter enforces Options.MaxSeries and MaxSeriesPerMeasurement.
// Series are counted from the catalog, which never forgets one (a series'
// kind is fixed for the life of the database), so the limits hold across
// restarts. It is used by the commitMu holder only.
type seriesLimiter struct {
	// pending counts, per measurement, the series the write being resolved
	// would create so far.
	pending map[string]int
}

// admitSeries reports whether the write being resolved may create one more
// series of measurement, with pend series already pending in it: nil, or an
// error wrapping ErrSeriesLimit. The caller holds commitMu and names the
// point. Both Write and the Appender resolve new series through it. A
// refusal is counted in Stats unless uncounted (a caller that will offer
// the same points to Write, which counts them, passes true).
func (db *DB) admitSeries(measurement string, pend int, uncounted bool) error {
	maxAll, maxMeas := db.opts.MaxSeries, db.opts.MaxSeriesPerMeasurement
	if maxAll <= 0 && maxMeas <= 0 {
		return nil
	}
	if maxAll > 0 && db.cat.Len()+pend >= maxAll {
		db.countRefusal(uncounted)
		return fmt.Errorf("%w: a new series of %s would pass MaxSeries %d", ErrSeriesLimit, measurement, maxAll)
	}
	if maxMeas <= 0 {
		return nil
	}
	l := &db.lim
	if pend == 0 || l.pending == nil {
		// The first new series of this write: forget the previous one's.
		if l.pending == nil {
			l.pending = make(map[string]int)
		}
		clear(l.pending)
	}
	have := len(db.cat.MeasurementIDs(measurement))
	if have+l.pending[measurement] >= maxMeas {
		db.countRefusal(uncounted)
		return fmt.Errorf("%w: a new series of %s would pass MaxSeriesPerMeasurement %d", ErrSeriesLimit, measurement, maxMeas)
	}
	l.pending[measurement]++
	return nil
}

func (db *DB) countRefusal(uncounted bool) {
	if !uncounted {
		db.st.seriesLimitRefusals.Add(1)
	}
}
