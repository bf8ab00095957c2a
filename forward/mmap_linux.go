package forward

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile preallocates f (whose first used bytes are already written) to
// size bytes and maps it shared and writable, so that frames are appended
// with a copy into the page cache instead of a write(2) each. The blocks
// are allocated up front (fallocate), so that a full disk is an error here
// and never a fault when a page is first written. It fails, leaving the
// file as it was, where the file system cannot preallocate.
func mapFile(f *os.File, used, size int64) ([]byte, error) {
	fd := int(f.Fd())
	if err := unix.Fallocate(fd, 0, 0, size); err != nil {
		f.Truncate(used) // in case it got part of the way
		return nil, fmt.Errorf("preallocate queue file: %w", err)
	}
	m, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		if terr := f.Truncate(used); terr != nil {
			return nil, fmt.Errorf("map queue file: %w (and cut its preallocation: %v)", err, terr)
		}
		return nil, fmt.Errorf("map queue file: %w", err)
	}
	return m, nil
}

// unmapFile releases a mapping made by mapFile. Its dirty pages stay in the
// page cache, and a later fsync of the file writes them.
func unmapFile(m []byte) error {
	if err := unix.Munmap(m); err != nil {
		return fmt.Errorf("unmap queue file: %w", err)
	}
	return nil
}

// populate maps the pages of m writable (MADV_POPULATE_WRITE, Linux 5.14)
// without changing what they hold.
func populate(m []byte) error { return unix.Madvise(m, unix.MADV_POPULATE_WRITE) }

// writeFrameAt writes a frame's header and payload at off with pwritev(2),
// without joining them first.
func writeFrameAt(f *os.File, hdr, payload []byte, off int64) (int, error) {
	fd := int(f.Fd())
	iov := [2][]byte{hdr, payload}
	bufs := iov[:]
	total := 0
	for len(bufs) > 0 {
		n, err := unix.Pwritev(fd, bufs, off+int64(total))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, io.ErrShortWrite
		}
		total += n
		for n > 0 {
			if n < len(bufs[0]) {
				bufs[0] = bufs[0][n:]
				break
			}
			n -= len(bufs[0])
			bufs = bufs[1:]
		}
	}
	return total, nil
}
