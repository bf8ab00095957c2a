// Package wal is strata's write-ahead log: every write the engine
// acknowledges is first a record here, so that it survives a crash.
//
// # Files
//
// A log is a directory of files named %08d.wal, numbered from 1. Only the
// newest file is ever written. Open never appends to an existing file: it
// starts a new one numbered past the highest present, after the engine has
// replayed the old ones with ReplayDir. A file rolls (is fsynced, closed and
// followed by the next number) once it passes Options.SegmentBytes, and on
// Rotate. Once a flush has made the records of files below N durable in a
// segment, RemoveBefore(N) deletes them.
//
// # Framing
//
// Each file starts with a 28-byte header: magic "SWAL", a version, the
// file's own number and the size of the file before it when this one was
// created, under a CRC-32C (version 1 files, still read, have a 20-byte
// header without that size). Records follow back to back: a 13-byte
// header (payload length, type, a CRC-32C of the length and type alone, and
// a CRC-32C of the header and payload), then the payload. The exact layout is
// drawn at the top of wal.go; the payloads the engine logs (Batch and Delete)
// are drawn at the top of record.go.
//
// # Durability
//
// Write appends a record with one write call and returns its position; it
// does not fsync. SyncTo(pos) makes the position durable as the sync mode
// says. Under SyncAlways concurrent callers share fsyncs (group commit): the
// first one to arrive fsyncs everything written so far, and callers whose
// records that covered return without an fsync of their own. SyncInterval
// fsyncs from a background goroutine; SyncNever leaves it to the OS, Rotate
// and Close. A failed write or fsync is sticky: the Log refuses every later
// write with the first error and never writes after a partial record.
//
// # Recovery
//
// ReplayDir reads the files in order and hands each intact record to a
// callback. A bad record at the tail of the last file (torn, zeroed, or
// failing its checksum, with no valid record anywhere after it) is the
// unacknowledged end of a crash: ReplayDir truncates the file there, fsyncs it
// and reports what it dropped (ReplayDir with ReadOnly only reports it, and
// TruncateTail cuts it later). Any other damage is an error wrapping
// base.ErrCorrupt that names the file and offset: an acknowledged record is
// never skipped silently. That includes a missing file (numbers are
// consecutive), and a file that is not the last whose size differs from
// what the next file's header recorded: cut, even exactly at a record
// boundary. The record header checksum lets ReplayDir tell a torn tail from
// damage by testing every later offset for a record start in O(1).
//
// # Compatibility
//
// This package is a building block of package engine, public so that the
// layout of the storage engine can be read and tested piece by piece. Its
// API has no compatibility promise and its signatures use types internal to
// strata (vfs.FS, point.Kind, ...): programs use package engine. What is
// stable is the durable format it documents.
package wal
