package vfs

import (
	"errors"
	"io/fs"
	"testing"
)

// TestTruncateSync checks that the cut survives a crash (it is synced) and
// that a failure to open, or an injected sync failure, is returned.
func TestTruncateSync(t *testing.T) {
	m := NewMem()
	f, _ := m.Create("f")
	mustSyncDir(t, m, "/")
	f.Write([]byte("abcdef"))
	f.Sync()
	f.Close()
	if err := TruncateSync(m, "f", 2); err != nil {
		t.Fatal(err)
	}
	wantContent(t, m.CrashClone(), "f", "ab")

	if err := TruncateSync(m, "missing", 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
	}

	errSync := errors.New("injected")
	inj := Inject(m, func(op Op, name string) error {
		if op == OpSync {
			return errSync
		}
		return nil
	})
	if err := TruncateSync(inj, "f", 1); !errors.Is(err, errSync) {
		t.Fatalf("sync failure: %v, want %v", err, errSync)
	}
}
