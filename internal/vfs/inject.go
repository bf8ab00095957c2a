package vfs

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
)

// Op names a filesystem operation for error injection.
type Op uint8

const (
	OpCreate Op = iota
	OpOpen
	OpWrite
	OpRead
	OpSync
	OpClose
	OpTruncate
	OpRename
	OpRemove
	OpMkdir
	OpReadDir
	OpStat
	OpSyncDir
	OpLock
)

var opNames = [...]string{"create", "open", "write", "read", "sync", "close", "truncate",
	"rename", "remove", "mkdir", "readdir", "stat", "syncdir", "lock"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// ErrInjected is the error returned by injected failures.
var ErrInjected = errors.New("vfs: injected error")

// Injector decides, before each operation, whether it fails. Returning a
// non-nil error makes the operation fail with it without touching the
// underlying FS. For OpWrite, ShortWrite lets half the bytes through first.
type Injector func(op Op, name string) error

// ShortWrite wraps an error returned by an Injector for OpWrite to make the
// write store the first half of its bytes before failing, as a torn write does.
type ShortWrite struct{ Err error }

func (s ShortWrite) Error() string { return "short write: " + s.Err.Error() }
func (s ShortWrite) Unwrap() error { return s.Err }

// Inject wraps fs so that every operation first asks inj.
func Inject(fs FS, inj Injector) FS { return &injectFS{fs: fs, inj: inj} }

// OnIndex returns an Injector that fails the n-th operation (0-based) among
// those for which match returns true (nil matches every operation), and
// every matching operation after it when sticky is true. Count reports how
// many matching operations were seen.
type OnIndex struct {
	N      int64
	Sticky bool
	Match  func(op Op, name string) bool
	seen   atomic.Int64
}

// Injector returns the injector function.
func (o *OnIndex) Injector() Injector {
	return func(op Op, name string) error {
		if o.Match != nil && !o.Match(op, name) {
			return nil
		}
		i := o.seen.Add(1) - 1
		if i == o.N || (o.Sticky && i > o.N) {
			return ErrInjected
		}
		return nil
	}
}

// Count reports how many matching operations were seen.
func (o *OnIndex) Count() int64 { return o.seen.Load() }

type injectFS struct {
	fs  FS
	inj Injector
}

func (f *injectFS) Create(name string) (File, error) {
	return f.open(OpCreate, "create", name, f.fs.Create)
}

func (f *injectFS) Open(name string) (File, error) {
	return f.open(OpOpen, "open", name, f.fs.Open)
}

func (f *injectFS) OpenReadWrite(name string) (File, error) {
	return f.open(OpOpen, "open", name, f.fs.OpenReadWrite)
}

// open asks the injector about op on name (verb names it in the error),
// then opens name with open and wraps the file.
func (f *injectFS) open(op Op, verb, name string, open func(string) (File, error)) (File, error) {
	if err := f.inj(op, name); err != nil {
		return nil, &os.PathError{Op: verb, Path: name, Err: err}
	}
	file, err := open(name)
	if err != nil {
		return nil, err
	}
	return &injectFile{File: file, name: name, inj: f.inj}, nil
}

func (f *injectFS) Rename(oldname, newname string) error {
	if err := f.inj(OpRename, newname); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return f.fs.Rename(oldname, newname)
}

func (f *injectFS) Remove(name string) error {
	if err := f.inj(OpRemove, name); err != nil {
		return &os.PathError{Op: "remove", Path: name, Err: err}
	}
	return f.fs.Remove(name)
}

func (f *injectFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := f.inj(OpMkdir, dir); err != nil {
		return &os.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	return f.fs.MkdirAll(dir, perm)
}

func (f *injectFS) ReadDir(dir string) ([]string, error) {
	if err := f.inj(OpReadDir, dir); err != nil {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: err}
	}
	return f.fs.ReadDir(dir)
}

func (f *injectFS) Stat(name string) (os.FileInfo, error) {
	if err := f.inj(OpStat, name); err != nil {
		return nil, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	return f.fs.Stat(name)
}

func (f *injectFS) SyncDir(dir string) error {
	if err := f.inj(OpSyncDir, dir); err != nil {
		return &os.PathError{Op: "syncdir", Path: dir, Err: err}
	}
	return f.fs.SyncDir(dir)
}

func (f *injectFS) Lock(name string) (io.Closer, error) {
	if err := f.inj(OpLock, name); err != nil {
		return nil, &os.PathError{Op: "lock", Path: name, Err: err}
	}
	return f.fs.Lock(name)
}

type injectFile struct {
	File
	name string
	inj  Injector
}

func (f *injectFile) Write(p []byte) (int, error) {
	if err := f.inj(OpWrite, f.name); err != nil {
		var sw ShortWrite
		if errors.As(err, &sw) {
			n, _ := f.File.Write(p[:len(p)/2])
			return n, &os.PathError{Op: "write", Path: f.name, Err: err}
		}
		return 0, &os.PathError{Op: "write", Path: f.name, Err: err}
	}
	return f.File.Write(p)
}

func (f *injectFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.inj(OpWrite, f.name); err != nil {
		var sw ShortWrite
		if errors.As(err, &sw) {
			n, _ := f.File.WriteAt(p[:len(p)/2], off)
			return n, &os.PathError{Op: "write", Path: f.name, Err: err}
		}
		return 0, &os.PathError{Op: "write", Path: f.name, Err: err}
	}
	return f.File.WriteAt(p, off)
}

func (f *injectFile) Read(p []byte) (int, error) {
	if err := f.inj(OpRead, f.name); err != nil {
		return 0, &os.PathError{Op: "read", Path: f.name, Err: err}
	}
	return f.File.Read(p)
}

func (f *injectFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.inj(OpRead, f.name); err != nil {
		return 0, &os.PathError{Op: "read", Path: f.name, Err: err}
	}
	return f.File.ReadAt(p, off)
}

func (f *injectFile) Sync() error {
	if err := f.inj(OpSync, f.name); err != nil {
		return &os.PathError{Op: "sync", Path: f.name, Err: err}
	}
	return f.File.Sync()
}

func (f *injectFile) Truncate(size int64) error {
	if err := f.inj(OpTruncate, f.name); err != nil {
		return &os.PathError{Op: "truncate", Path: f.name, Err: err}
	}
	return f.File.Truncate(size)
}

func (f *injectFile) Close() error {
	err := f.File.Close()
	if ierr := f.inj(OpClose, f.name); ierr != nil && err == nil {
		err = &os.PathError{Op: "close", Path: f.name, Err: ierr}
	}
	return err
}
