package vfs

import (
	"errors"
	"os"
)

// Linker is implemented by filesystems that can hard-link a file.
type Linker interface {
	// Link makes newname a hard link to oldname.
	Link(oldname, newname string) error
}

// Link makes newname a hard link to oldname when fs can link files, and
// returns an error wrapping errors.ErrUnsupported when it cannot. Across
// filesystems the operating system's error is returned: callers copy then.
func Link(fs FS, oldname, newname string) error {
	l, ok := fs.(Linker)
	if !ok {
		return errors.ErrUnsupported
	}
	return l.Link(oldname, newname)
}

func (osFS) Link(oldname, newname string) error { return os.Link(oldname, newname) }
