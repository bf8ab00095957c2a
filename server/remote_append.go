package server

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/point"
)

// remoteCommitSamples is the most samples one Commit of a remote write
// holds: a request of up to this many (Prometheus sends 2,000 by default)
// is one Commit, a larger one is several, so that what a request holds
// pending stays bounded (about 3 MiB of appender entries).
const remoteCommitSamples = 1 << 16

// errRemoteFallback ends the appender path of a request: a Commit was
// refused for a point, and the rest goes through db.Write.
var errRemoteFallback = errors.New("server: remote write goes through Write")

// remoteMark is a position in a request: the series whose field starts at
// off in the request, of which skip samples were read, and the counts of
// the request as of then.
type remoteMark struct {
	off, skip int
	counts    remoteCounts
}

// remoteAppender returns an appender for one request, from a pool: its
// batch and tables are reused from request to request.
func (s *Server) remoteAppender() point.SampleAppender {
	if a, ok := s.remoteApps.Get().(point.SampleAppender); ok {
		return a
	}
	return s.db.SampleAppender()
}

func (s *Server) putRemoteAppender(a point.SampleAppender) {
	a.Rollback()
	s.remoteApps.Put(a)
}

// appendAll stores the request through the appender. It returns
// errRemoteFallback when a Commit was refused for a point: nothing of that
// Commit is stored, the counts are those of st.cp, and the request is to
// be stored from st.cp on through db.Write.
func (st *remoteStore) appendAll() error {
	scratch := make([]wireLabel, 0, 16)
	if err := eachSeriesFrom(st.raw, 0, scratch, st.appendSeries); err != nil {
		st.app.Rollback()
		return err
	}
	return st.commit()
}

// appendSeries appends the samples of one series, resolving it once.
func (st *remoteStore) appendSeries(off int, labels []wireLabel, tooMany bool, ts []byte) error {
	st.off, st.read, st.ref = off, 0, 0
	if st.refuseLabels(labels, tooMany) {
		return nil
	}
	first := st.app.Pending() // of this series' samples in the batch
	it := sampleIter{b: ts}
	for it.next() {
		st.read++
		if !st.keep(labels, it.t, it.v) {
			continue
		}
		if st.app.Pending() >= remoteCommitSamples {
			if err := st.commit(); err != nil {
				return err
			}
			first = 0
		}
		err := st.append(labels, it.t*msNanos, it.v)
		if err != nil && errors.Is(err, point.ErrBatchFull) && st.app.Pending() > 0 {
			if err := st.commit(); err != nil {
				return err
			}
			first = 0
			err = st.append(labels, it.t*msNanos, it.v)
		}
		if err == nil {
			continue
		}
		reason, ok := refusedBy(err)
		if !ok {
			return err
		}
		// The engine refuses the series: none of it is stored (what a
		// Commit before stored stays).
		st.app.Truncate(first)
		st.refused[reason]++
		if st.reject() {
			name, tags := st.names(labels)
			st.msgs = append(st.msgs, fmt.Sprintf("series %s: %v", pointSeriesName(&engine.Point{Measurement: name, Tags: tags}), err))
		}
		return nil
	}
	return nil
}

// append appends one sample of the series labels, by its ref once it has
// one.
func (st *remoteStore) append(labels []wireLabel, t int64, v float64) error {
	if st.ref != 0 {
		ref, err := st.app.Append(st.ref, "", nil, "value", t, engine.Float(v))
		if err == nil || errors.Is(err, point.ErrBatchFull) {
			if err == nil {
				st.ref = ref
			}
			return err
		}
		// A ref the appender no longer takes: resolve the names again.
	}
	name, tags := st.names(labels)
	ref, err := st.app.Append(0, name, tags, "value", t, engine.Float(v))
	if err != nil {
		st.ref = 0
		return err
	}
	st.ref = ref
	return nil
}

// names returns the metric name and the tags (the other labels, without
// empty values, sorted as checkLabels left them) of labels. The strings
// are views of the request's bytes, which are never written after they
// are decoded nor reused for another request, so they stay valid whatever
// the engine keeps of them; the tags are a scratch that the next call
// reuses (Append keeps no caller slice).
func (st *remoteStore) names(labels []wireLabel) (string, []engine.Tag) {
	tags := st.tags[:0]
	var name string
	for _, l := range labels {
		if string(l.name) == "__name__" {
			name = view(l.value)
		} else if len(l.value) > 0 {
			tags = append(tags, engine.Tag{Key: view(l.name), Value: view(l.value)})
		}
	}
	st.tags = tags
	return name, tags
}

// view returns b as a string without copying it: b must never change.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// commit commits the appender's batch and marks the position after it.
func (st *remoteStore) commit() error {
	n := st.app.Pending()
	if n > 0 {
		err := st.app.Commit()
		if err != nil {
			var pe *engine.PointError
			if _, ok := refusedBy(err); ok && errors.As(err, &pe) {
				st.remoteCounts = st.cp.counts
				return errRemoteFallback
			}
			return err
		}
		st.stored += n
	}
	// The sample being read, if any, is not in the batch committed.
	st.cp = remoteMark{off: st.off, skip: max(st.read-1, 0), counts: st.remoteCounts}
	return nil
}

// refusedBy returns the reason to count err under when it is the engine
// refusing a series, or false for a failure.
func refusedBy(err error) (int, bool) {
	switch {
	case errors.Is(err, engine.ErrInvalid):
		return refusedInvalid, true
	case errors.Is(err, engine.ErrFieldTypeConflict):
		return refusedTypeConflict, true
	case errors.Is(err, engine.ErrSeriesLimit):
		return refusedEngine, true
	}
	return 0, false
}
