package engine

import (
	"context"
	"errors"
)

var errNotImplemented = errors.New("engine: not implemented yet")

// DB is an open strata database.
type DB struct{}

// Open opens (creating if missing) the database in dir.
func Open(dir string, opts *Options) (*DB, error) { return nil, errNotImplemented }

// Write stores points atomically: all of them or none.
func (db *DB) Write(points []Point) error { return errNotImplemented }

// Query returns the series and samples selected by q.
func (db *DB) Query(ctx context.Context, q Query) ([]Series, error) { return nil, errNotImplemented }

// Delete removes the samples selected by s that were written before it.
func (db *DB) Delete(ctx context.Context, s Selector) error { return errNotImplemented }

// Flush writes the memtable to a segment and returns when it is durable.
func (db *DB) Flush() error { return errNotImplemented }

// Compact runs compaction until no work is left.
func (db *DB) Compact() error { return errNotImplemented }

// Close flushes, stops background work and releases the directory.
func (db *DB) Close() error { return errNotImplemented }
