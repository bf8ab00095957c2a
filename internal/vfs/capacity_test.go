package vfs

import (
	"bytes"
	"errors"
	"syscall"
	"testing"
)

// A MemFS with a capacity fails writes past it with ENOSPC, storing what
// fits, and removing a file makes room again.
func TestMemCapacity(t *testing.T) {
	m := NewMem()
	m.SetCapacity(100)
	a, err := m.Create("a")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := a.Write(make([]byte, 60)); n != 60 || err != nil {
		t.Fatalf("write 60: %d %v", n, err)
	}
	b, err := m.Create("b")
	if err != nil {
		t.Fatal(err)
	}
	n, err := b.Write(bytes.Repeat([]byte{1}, 50))
	if n != 40 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the capacity: %d %v, want 40 and ENOSPC", n, err)
	}
	if err := a.Truncate(70); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("grow past the capacity: %v", err)
	}
	if got := m.Used(); got != 100 {
		t.Fatalf("used %d, want 100", got)
	}
	// Overwriting in place needs no room.
	if n, err := b.WriteAt([]byte{2, 2}, 0); n != 2 || err != nil {
		t.Fatalf("overwrite: %d %v", n, err)
	}
	a.Close()
	if err := m.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Write(make([]byte, 50)); n != 50 || err != nil {
		t.Fatalf("write after a remove: %d %v", n, err)
	}
	got, err := ReadFile(m, "b")
	if err != nil || len(got) != 90 || got[0] != 2 || got[39] != 1 {
		t.Fatalf("b holds %d bytes (%v)", len(got), err)
	}
}

// WriteAt writes at an offset, through Inject too, and is refused on a
// file whose writes go to its end.
func TestMemWriteAt(t *testing.T) {
	m := NewMem()
	inj := &OnIndex{N: 1, Match: func(op Op, _ string) bool { return op == OpWrite }}
	fs := Inject(m, inj.Injector())
	f, err := fs.Create("f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("xyz"), 2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("q"), 0); !errors.Is(err, ErrInjected) {
		t.Fatalf("injected WriteAt: %v", err)
	}
	f.Close()
	if got, _ := ReadFile(m, "f"); string(got) != "\x00\x00xyz" {
		t.Fatalf("f holds %q", got)
	}
	rw, err := m.OpenReadWrite("f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.WriteAt([]byte("a"), 0); err == nil {
		t.Fatal("WriteAt on an appending file succeeded")
	}
}
