package engine

import (
	"context"
	"errors"
)

// errNotImplemented marks contract calls whose implementation is under way.
var errNotImplemented = errors.New("engine: not implemented")

// Measurements returns the measurements that have at least one visible
// sample, sorted.
func (db *DB) Measurements(ctx context.Context) ([]string, error) {
	return nil, errNotImplemented
}

// TagKeys returns the tag keys of the series s selects that have a visible
// sample in its range, sorted.
func (db *DB) TagKeys(ctx context.Context, s Selector) ([]string, error) {
	return nil, errNotImplemented
}

// TagValues returns the values of tag key among the series s selects that
// have a visible sample in its range, sorted; never "".
func (db *DB) TagValues(ctx context.Context, key string, s Selector) ([]string, error) {
	return nil, errNotImplemented
}

// SeriesInfo describes the series s selects that have a visible sample in
// its range, sorted by canonical series key, without reading samples.
func (db *DB) SeriesInfo(ctx context.Context, s Selector) ([]SeriesInfo, error) {
	return nil, errNotImplemented
}

// Last returns, for each series s selects, its newest visible sample in the
// range (all time when Start == End == 0), as one Series of one Sample.
func (db *DB) Last(ctx context.Context, s Selector) ([]Series, error) {
	return nil, errNotImplemented
}
