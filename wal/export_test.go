package wal

import "github.com/stratadb/strata/internal/vfs"

// Helpers the tests use, kept out of the package's API.

// Append is Write followed by SyncTo.
func (l *Log) Append(typ byte, payload []byte) (Pos, error) {
	pos, err := l.Write(typ, payload)
	if err != nil {
		return Pos{}, err
	}
	if err := l.SyncTo(pos); err != nil {
		return Pos{}, err
	}
	return pos, nil
}

// Dir returns the directory of the log.
func (l *Log) Dir() string { return l.dir }

// Replay reads every WAL file numbered from or above in dir, in order, and
// calls fn for each intact record, truncating a torn tail of the last
// file. It is ReplayDir with ReplayOptions{From: from}.
func Replay(fs vfs.FS, dir string, from uint64, fn func(file uint64, typ byte, payload []byte) error) (ReplayResult, error) {
	return ReplayDir(fs, dir, ReplayOptions{From: from}, fn)
}

// SyncCount returns the number of file fsyncs performed (Open's, group-commit
// leaders', rolls' and Close's), for measuring group commit.
func (l *Log) SyncCount() int64 { return l.syncCount.Load() }
