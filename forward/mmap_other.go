//go:build !linux

package forward

import (
	"errors"
	"os"
)

// mapFile is not used off Linux: frames are appended with write(2).
func mapFile(f *os.File, used, size int64) ([]byte, error) {
	return nil, errors.New("forward: queue files are mapped on linux only")
}

func unmapFile(m []byte) error { return nil }

func populate(m []byte) error { return errors.New("forward: no populate") }

// writeFrameAt is not used off Linux (no file is mapped there).
func writeFrameAt(f *os.File, hdr, payload []byte, off int64) (int, error) {
	return f.WriteAt(append(hdr[:len(hdr):len(hdr)], payload...), off)
}
