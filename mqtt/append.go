package mqtt

// The appender path of the subscriber. When its Writer is a
// lineproto.AppenderDB (*engine.DB is one), a batch of messages is handed
// to one engine appender and stored by one Commit: atomic and durable as
// one Write, and the messages are acknowledged only after Commit returned.
// The subscriber remembers the ref of each series it has seen (by
// measurement and tags, then by field), so a known series is appended
// without resolving its names again.

import (
	"context"
	"errors"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/lineproto"
)

// Bounds of the subscriber's table of refs: it is emptied when it would
// hold more series sections or bytes.
const (
	maxRefSeries = 1 << 16
	maxRefBytes  = 8 << 20
	refEntryCost = 64
)

// refTable remembers the refs of the series seen, by series section
// (measurement and tags, in the order the decoder gives them) and field.
type refTable struct {
	sections map[string][]fieldRef
	bytes    int
	key      []byte // scratch
}

type fieldRef struct {
	field string
	ref   engine.SeriesRef
}

// section returns the key of p's series section in the scratch.
func (t *refTable) section(p *engine.Point) []byte {
	k := append(t.key[:0], p.Measurement...)
	for _, tag := range p.Tags {
		k = append(k, 0)
		k = append(k, tag.Key...)
		k = append(k, 0)
		k = append(k, tag.Value...)
	}
	t.key = k
	return k
}

func (t *refTable) lookup(section []byte, field string) engine.SeriesRef {
	for _, r := range t.sections[string(section)] {
		if r.field == field {
			return r.ref
		}
	}
	return 0
}

func (t *refTable) set(section []byte, field string, ref engine.SeriesRef) {
	refs, ok := t.sections[string(section)]
	for i := range refs {
		if refs[i].field == field {
			refs[i].ref = ref
			return
		}
	}
	cost := refEntryCost + len(field)
	if !ok {
		cost += len(section) + refEntryCost
	}
	if t.sections == nil || len(t.sections) >= maxRefSeries || t.bytes+cost > maxRefBytes {
		t.sections = make(map[string][]fieldRef)
		t.bytes, ok = 0, false
		cost = 2*refEntryCost + len(section) + len(field)
	}
	t.bytes += cost
	if !ok {
		t.sections[string(section)] = []fieldRef{{field: field, ref: ref}}
		return
	}
	t.sections[string(section)] = append(refs, fieldRef{field: field, ref: ref})
}

// appenderOf returns the appender of the subscriber's Writer, or nil when
// it has none.
func appenderOf(db Writer) point.SampleAppender {
	if adb, ok := db.(lineproto.AppenderDB); ok {
		return adb.SampleAppender()
	}
	return nil
}

// appendBatch stores s.points through the appender in one Commit. A point
// the engine refuses at Append is dropped and counted as a failure of its
// message; a Commit refused for a point (a series limit, or a kind that
// another writer set meanwhile) stores the batch through Write instead,
// which drops the refused points one by one. Any other failure is retried
// with backoff until it succeeds or ctx is done: the batch is then not
// stored and its messages are not acknowledged.
func (s *Subscriber) appendBatch(ctx context.Context, batch []inbound) error {
	app := s.app
	backoff := firstRetryWait
	for len(s.points) > 0 {
		err := s.appendPoints(batch)
		if err == nil {
			if err = s.commitHook(); err == nil {
				err = app.Commit()
			} else {
				app.Rollback()
			}
			if err == nil {
				return nil
			}
		}
		var pe *engine.PointError
		if errors.As(err, &pe) && refusal(pe.Err) || errors.Is(err, point.ErrBatchFull) {
			return s.write(ctx, batch)
		}
		if backoff, err = s.retryWait(ctx, err, backoff); err != nil {
			return err
		}
	}
	return nil
}

// commitHook is called before each Commit: tests make it fail.
func (s *Subscriber) commitHook() error {
	if s.beforeCommit != nil {
		return s.beforeCommit()
	}
	return nil
}

// appendPoints appends s.points, each whole or not at all, dropping those
// the engine refuses. On a failure the appender's batch is rolled back.
func (s *Subscriber) appendPoints(batch []inbound) error {
	app := s.app
	for i := 0; i < len(s.points); i++ {
		mark := app.Pending()
		err := s.appendPoint(&s.points[i])
		if err == nil {
			continue
		}
		app.Truncate(mark)
		if errors.Is(err, point.ErrBatchFull) || !refusal(err) {
			app.Rollback()
			return err
		}
		s.dropPoint(i, batch, err)
		i--
	}
	return nil
}

// appendPoint appends the fields of p, by the refs remembered.
func (s *Subscriber) appendPoint(p *engine.Point) error {
	t := &s.refs
	section := t.section(p)
	for _, f := range p.Fields {
		ref := t.lookup(section, f.Key)
		r, err := s.app.Append(ref, p.Measurement, p.Tags, f.Key, p.Time, f.Value)
		if err != nil && ref != 0 && !errors.Is(err, point.ErrBatchFull) && refusal(err) {
			// A ref of a series whose batch was not stored, or a kind
			// conflict: resolve the names, which also names them in the
			// error.
			r, err = s.app.Append(0, p.Measurement, p.Tags, f.Key, p.Time, f.Value)
		}
		if err != nil {
			return err
		}
		if r != ref {
			t.set(section, f.Key, r)
		}
	}
	return nil
}

// refusal reports whether err is the engine refusing a point rather than a
// failure.
func refusal(err error) bool {
	return errors.Is(err, engine.ErrInvalid) || errors.Is(err, engine.ErrFieldTypeConflict) ||
		errors.Is(err, engine.ErrSeriesLimit)
}
