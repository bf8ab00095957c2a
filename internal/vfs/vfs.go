// Package vfs is the filesystem seam of strata. Every file strata reads or
// writes goes through an FS, so tests can inject errors (see Inject), count
// fsyncs, or fail at the N-th operation.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/gofrs/flock"
)

// File is an open file. ReadAt is a positional read (pread): it is safe for
// concurrent use and does not move the offset that Read and Write use.
// WriteAt is a positional write (pwrite), which files opened by
// OpenReadWrite (whose writes go to the end) refuse.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	Sync() error
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
}

// FS is the set of filesystem operations strata uses.
type FS interface {
	// Create creates or truncates name for reading and writing.
	Create(name string) (File, error)
	// Open opens name read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing without
	// truncating it; writes go to its end.
	OpenReadWrite(name string) (File, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir returns the names of the entries of dir, sorted.
	ReadDir(dir string) ([]string, error)
	Stat(name string) (os.FileInfo, error)
	// SyncDir fsyncs a directory so that renames and creations in it are durable.
	SyncDir(dir string) error
	// Lock takes an exclusive advisory lock on name, creating it if needed.
	// It fails at once, with an error wrapping ErrLocked, when another
	// holder has it. Closing the returned io.Closer releases the lock.
	Lock(name string) (io.Closer, error)
}

// ErrLocked is wrapped by Lock when the lock is held elsewhere.
var ErrLocked = errors.New("vfs: lock held")

// Default is the operating system's filesystem.
var Default FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

func (osFS) Open(name string) (File, error) { return os.Open(name) }

func (osFS) OpenReadWrite(name string) (File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_APPEND, 0)
}

func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (osFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	slices.Sort(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Lock takes an exclusive, non-blocking lock on name (flock on Unix,
// LockFileEx on Windows, through gofrs/flock so the root module builds for
// every platform). A second Lock of the same file, from this process or
// another, fails with ErrLocked until the first is closed.
func (osFS) Lock(name string) (io.Closer, error) {
	l := flock.New(name)
	ok, err := l.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if !ok {
		return nil, fmt.Errorf("%w: lock %s", ErrLocked, name)
	}
	return unlocker{l}, nil
}

type unlocker struct{ l *flock.Flock }

func (u unlocker) Close() error { return u.l.Close() }

// SyncDirOf fsyncs the directory that holds path.
func SyncDirOf(fs FS, path string) error { return fs.SyncDir(filepath.Dir(path)) }

// TruncateSync cuts the file name to size bytes and fsyncs it (a torn or
// damaged tail removed for good).
func TruncateSync(fs FS, name string, size int64) error {
	f, err := fs.OpenReadWrite(name)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteFileAtomic publishes data at name: it writes name+".tmp", fsyncs it,
// renames it over name and fsyncs the directory. A crash leaves either the
// old file or the new one.
func WriteFileAtomic(fs FS, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		fs.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		fs.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		fs.Remove(tmp)
		return err
	}
	if err := fs.Rename(tmp, name); err != nil {
		fs.Remove(tmp)
		return err
	}
	return SyncDirOf(fs, name)
}

// ReadFile reads the whole of a small file (a manifest, a catalog).
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
