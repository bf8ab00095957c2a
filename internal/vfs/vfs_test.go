package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "MANIFEST")
	if err := WriteFileAtomic(Default, name, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(Default, name, []byte("two")); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(Default, name)
	if err != nil || string(got) != "two" {
		t.Fatalf("got %q, %v", got, err)
	}
	names, _ := Default.ReadDir(dir)
	if len(names) != 1 {
		t.Fatalf("temp file left behind: %v", names)
	}
}

func TestWriteFileAtomicFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "MANIFEST")
	if err := WriteFileAtomic(Default, name, []byte("old")); err != nil {
		t.Fatal(err)
	}
	for _, op := range []Op{OpCreate, OpWrite, OpSync, OpRename} {
		fs := Inject(Default, func(o Op, _ string) error {
			if o == op {
				return ErrInjected
			}
			return nil
		})
		if err := WriteFileAtomic(fs, name, []byte("new")); !errors.Is(err, ErrInjected) {
			t.Fatalf("%v: got %v, want injected error", op, err)
		}
		got, _ := ReadFile(Default, name)
		if string(got) != "old" {
			t.Fatalf("%v: file is %q after a failed replace", op, got)
		}
		if _, err := os.Stat(name + ".tmp"); !os.IsNotExist(err) {
			t.Fatalf("%v: temp file left behind", op)
		}
	}
}

func TestLockIsExclusive(t *testing.T) {
	name := filepath.Join(t.TempDir(), "LOCK")
	l, err := Default.Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Default.Lock(name); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: got %v, want ErrLocked", err)
	}
	l.Close()
	l2, err := Default.Lock(name)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.Close()
}

func TestOnIndexAndShortWrite(t *testing.T) {
	dir := t.TempDir()
	oi := &OnIndex{N: 1, Match: func(op Op, _ string) bool { return op == OpWrite }}
	fs := Inject(Default, oi.Injector())
	f, err := fs.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("ab")); err != nil {
		t.Fatalf("first write: %v", err)
	}
	if _, err := f.Write([]byte("cd")); !errors.Is(err, ErrInjected) {
		t.Fatalf("second write: got %v", err)
	}
	if _, err := f.Write([]byte("ef")); err != nil {
		t.Fatalf("third write (not sticky): %v", err)
	}
	f.Close()
	if oi.Count() != 3 {
		t.Fatalf("count %d, want 3", oi.Count())
	}

	short := Inject(Default, func(op Op, _ string) error {
		if op == OpWrite {
			return ShortWrite{Err: ErrInjected}
		}
		return nil
	})
	g, _ := short.Create(filepath.Join(dir, "g"))
	n, err := g.Write([]byte("abcd"))
	g.Close()
	if n != 2 || !errors.Is(err, ErrInjected) {
		t.Fatalf("short write: n=%d err=%v", n, err)
	}
	got, _ := ReadFile(Default, filepath.Join(dir, "g"))
	if string(got) != "ab" {
		t.Fatalf("short write stored %q", got)
	}
}
