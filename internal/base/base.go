// Package base holds the error vocabulary shared by every strata package.
//
// The sentinels are re-exported by package engine (engine.ErrCorrupt is
// base.ErrCorrupt), so a leaf package such as wal or segment can return an
// error that callers of the public API match with errors.Is.
package base

import (
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrClosed is returned by any call on a closed DB or log.
	ErrClosed = errors.New("strata: closed")
	// ErrFieldTypeConflict is returned when a write gives a series a value of
	// another kind than the one fixed by its first write.
	ErrFieldTypeConflict = errors.New("strata: field type conflict")
	// ErrInvalid is returned for input that breaks the data model.
	ErrInvalid = errors.New("strata: invalid input")
	// ErrCorrupt is returned when bytes read from disk fail validation.
	ErrCorrupt = errors.New("strata: corrupt data")
	// ErrLocked is returned by Open when another DB holds the directory.
	ErrLocked = errors.New("strata: database is locked by another process")
	// ErrReadOnly is returned by the write calls of a DB opened ReadOnly.
	ErrReadOnly = errors.New("strata: database is open read-only")
	// ErrNotDatabase is returned by Open for a directory that holds no
	// strata database and is not empty (or, read-only, is missing or empty).
	ErrNotDatabase = errors.New("strata: not a strata database")
	// ErrSeriesLimit is returned by a write that would create a series
	// beyond the DB's MaxSeries or MaxSeriesPerMeasurement.
	ErrSeriesLimit = errors.New("strata: series limit reached")
)

// CorruptionError reports damaged bytes at a position in a file. It matches
// ErrCorrupt with errors.Is and exposes the cause with errors.Unwrap.
type CorruptionError struct {
	Path   string // file the bad bytes were read from
	Offset int64  // byte offset of the damaged record, block or section
	Err    error  // what failed: a checksum, a magic, a length, ...
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("%s at offset %d: %v: %v", e.Path, e.Offset, ErrCorrupt, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// Is reports true for ErrCorrupt so callers can write errors.Is(err, ErrCorrupt).
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// Corruptf returns a *CorruptionError for path and offset with a formatted cause.
func Corruptf(path string, offset int64, format string, args ...any) error {
	return &CorruptionError{Path: path, Offset: offset, Err: fmt.Errorf(format, args...)}
}

// PointError reports which point of a Write call was rejected and why. Err
// wraps ErrInvalid, ErrFieldTypeConflict or ErrSeriesLimit. Ingest code (lineproto) uses the
// index to reject one line and retry the rest of its batch.
type PointError struct {
	Index int   // index of the point in the slice passed to Write
	Err   error // the reason
}

func (e *PointError) Error() string { return fmt.Sprintf("point %d: %v", e.Index, e.Err) }

func (e *PointError) Unwrap() error { return e.Err }
