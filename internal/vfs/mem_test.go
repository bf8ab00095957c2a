package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// memWrite creates name with data, optionally syncing the file.
func memWrite(t *testing.T, m *MemFS, name, data string, sync bool) {
	t.Helper()
	f, err := m.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustSyncDir(t *testing.T, m *MemFS, dir string) {
	t.Helper()
	if err := m.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
}

// content returns name's bytes, or "<missing>" when it does not exist.
func content(t *testing.T, m *MemFS, name string) string {
	t.Helper()
	b, err := ReadFile(m, name)
	if errors.Is(err, fs.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func wantContent(t *testing.T, m *MemFS, name, want string) {
	t.Helper()
	if got := content(t, m, name); got != want {
		t.Fatalf("%s is %q, want %q", name, got, want)
	}
}

func TestMemUnsyncedDataIsLost(t *testing.T) {
	m := NewMem()
	f, err := m.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	mustSyncDir(t, m, "/")
	f.Write([]byte("abc"))
	wantContent(t, m.CrashClone(), "/f", "")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("def"))
	wantContent(t, m, "/f", "abcdef")
	wantContent(t, m.CrashClone(), "/f", "abc")
	f.Sync()
	wantContent(t, m.CrashClone(), "/f", "abcdef")

	// Create on an existing file truncates the same inode: until a Sync
	// the old bytes are what a crash leaves.
	g, err := m.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("x"))
	wantContent(t, m, "/f", "x")
	wantContent(t, m.CrashClone(), "/f", "abcdef")
	g.Sync()
	wantContent(t, m.CrashClone(), "/f", "x")
}

func TestMemCreateWithoutSyncDirVanishes(t *testing.T) {
	m := NewMem()
	memWrite(t, m, "new", "data", true)
	wantContent(t, m, "new", "data")
	c := m.CrashClone()
	wantContent(t, c, "new", "<missing>")
	if names, _ := c.ReadDir("/"); len(names) != 0 {
		t.Fatalf("clone lists %v", names)
	}
	mustSyncDir(t, m, ".")
	wantContent(t, m.CrashClone(), "new", "data")
}

func TestMemRenameWithoutSyncDirReverts(t *testing.T) {
	m := NewMem()
	memWrite(t, m, "a", "A", true)
	memWrite(t, m, "b", "B", true)
	mustSyncDir(t, m, "/")
	if err := m.Rename("a", "b"); err != nil {
		t.Fatal(err)
	}
	wantContent(t, m, "a", "<missing>")
	wantContent(t, m, "b", "A")
	c := m.CrashClone()
	wantContent(t, c, "a", "A")
	wantContent(t, c, "b", "B")
	mustSyncDir(t, m, "/")
	c = m.CrashClone()
	wantContent(t, c, "a", "<missing>")
	wantContent(t, c, "b", "A")
}

func TestMemRemoveWithoutSyncDirReverts(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	memWrite(t, m, "d/f", "x", true)
	mustSyncDir(t, m, "d")
	mustSyncDir(t, m, "/")
	if err := m.Remove("d/f"); err != nil {
		t.Fatal(err)
	}
	wantContent(t, m, "d/f", "<missing>")
	wantContent(t, m.CrashClone(), "d/f", "x")
	mustSyncDir(t, m, "d")
	wantContent(t, m.CrashClone(), "d/f", "<missing>")
}

func TestMemMkdirAllDurability(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("/a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	memWrite(t, m, "/a/b/f", "F", true)
	mustSyncDir(t, m, "/a/b")
	// Neither a's entry in the root nor b's entry in a is durable.
	if _, err := m.CrashClone().Stat("/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat a after crash: %v", err)
	}
	mustSyncDir(t, m, "/")
	c := m.CrashClone()
	if fi, err := c.Stat("/a"); err != nil || !fi.IsDir() {
		t.Fatalf("stat a after crash: %v %v", fi, err)
	}
	if _, err := c.Stat("/a/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat a/b after crash: %v", err)
	}
	mustSyncDir(t, m, "/a")
	wantContent(t, m.CrashClone(), "/a/b/f", "F")

	if err := m.MkdirAll("/a/b/f", 0o755); err == nil {
		t.Fatal("MkdirAll through a file succeeded")
	}
}

func TestMemAppendAndOffsets(t *testing.T) {
	m := NewMem()
	memWrite(t, m, "f", "hello", false)
	f, err := m.OpenReadWrite("f")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if n, err := f.Read(buf); n != 2 || err != nil || string(buf) != "he" {
		t.Fatalf("read: %d %v %q", n, err, buf)
	}
	// O_APPEND: the write goes to the end, not to the read offset.
	if _, err := f.Write([]byte(" world")); err != nil {
		t.Fatal(err)
	}
	wantContent(t, m, "f", "hello world")
	if n, err := f.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read at end: %d %v", n, err)
	}
	f.Close()
	if _, err := f.Write([]byte("x")); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}

	r, err := m.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Write([]byte("x")); err == nil {
		t.Fatal("write to a read-only file succeeded")
	}
	if err := r.Truncate(0); err == nil {
		t.Fatal("truncate of a read-only file succeeded")
	}
	if fi, err := r.Stat(); err != nil || fi.Size() != 11 || fi.Name() != "f" || fi.IsDir() || fi.Mode().Perm() != 0o644 {
		t.Fatalf("stat: %v %v", fi, err)
	}
}

func TestMemReadAt(t *testing.T) {
	m := NewMem()
	memWrite(t, m, "f", "0123456789", false)
	f, _ := m.Open("f")
	defer f.Close()
	buf := make([]byte, 4)
	if n, err := f.ReadAt(buf, 3); n != 4 || err != nil || string(buf) != "3456" {
		t.Fatalf("ReadAt(3): %d %v %q", n, err, buf)
	}
	if n, err := f.ReadAt(buf, 8); n != 2 || err != io.EOF || string(buf[:n]) != "89" {
		t.Fatalf("ReadAt(8): %d %v %q", n, err, buf[:n])
	}
	if n, err := f.ReadAt(buf, 10); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt(10): %d %v", n, err)
	}
	if n, err := f.ReadAt(buf, 100); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt(100): %d %v", n, err)
	}
	if _, err := f.ReadAt(buf, -1); err == nil {
		t.Fatal("ReadAt(-1) succeeded")
	}
	// ReadAt does not move the offset Read uses.
	all, err := io.ReadAll(f)
	if err != nil || string(all) != "0123456789" {
		t.Fatalf("ReadAll: %q %v", all, err)
	}
}

func TestMemTruncate(t *testing.T) {
	m := NewMem()
	f, _ := m.Create("f")
	mustSyncDir(t, m, "/")
	f.Write([]byte("abcdef"))
	f.Sync()
	if err := f.Truncate(2); err != nil {
		t.Fatal(err)
	}
	wantContent(t, m, "f", "ab")
	wantContent(t, m.CrashClone(), "f", "abcdef") // the truncation is not synced
	f.Write([]byte("XY"))                         // the offset is past the end: a zero gap
	wantContent(t, m, "f", "ab\x00\x00\x00\x00XY")
	f.Sync()
	wantContent(t, m.CrashClone(), "f", "ab\x00\x00\x00\x00XY")
	f.Truncate(10)
	if fi, _ := m.Stat("f"); fi.Size() != 10 {
		t.Fatalf("size after growing truncate: %d", fi.Size())
	}
	f.Truncate(3)
	f.Sync()
	wantContent(t, m.CrashClone(), "f", "ab\x00")
	if err := f.Truncate(-1); err == nil {
		t.Fatal("negative truncate succeeded")
	}
}

func TestMemReadDirSorted(t *testing.T) {
	m := NewMem()
	m.MkdirAll("d/sub", 0o755)
	for _, n := range []string{"zeta", "alpha", "mid", "000"} {
		memWrite(t, m, "d/"+n, n, false)
	}
	names, err := m.ReadDir("d")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"000", "alpha", "mid", "sub", "zeta"}; !slices.Equal(names, want) {
		t.Fatalf("ReadDir = %v, want %v", names, want)
	}
	if _, err := m.ReadDir("d/alpha"); err == nil {
		t.Fatal("ReadDir of a file succeeded")
	}
	if fi, err := m.Stat("d/sub"); err != nil || !fi.IsDir() || fi.Name() != "sub" || !fi.Mode().IsDir() {
		t.Fatalf("stat dir: %v %v", fi, err)
	}
	if err := m.Remove("d"); err == nil {
		t.Fatal("removing a non-empty directory succeeded")
	}
}

func TestMemMissingFiles(t *testing.T) {
	m := NewMem()
	checks := map[string]error{}
	_, checks["open"] = m.Open("nope")
	_, checks["openrw"] = m.OpenReadWrite("nope")
	_, checks["stat"] = m.Stat("nope")
	_, checks["readdir"] = m.ReadDir("nope")
	_, checks["create in missing dir"] = m.Create("nodir/f")
	checks["remove"] = m.Remove("nope")
	checks["rename"] = m.Rename("nope", "other")
	checks["syncdir"] = m.SyncDir("nope")
	for what, err := range checks {
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: got %v, want ErrNotExist", what, err)
		}
	}
	_, err := m.Open("nope")
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != "nope" {
		t.Errorf("open error %v is not a *PathError naming the file", err)
	}
}

func TestMemLockIsExclusive(t *testing.T) {
	m := NewMem()
	l, err := m.Lock("LOCK")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lock("/LOCK"); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: got %v, want ErrLocked", err)
	}
	if _, err := m.Stat("LOCK"); err != nil {
		t.Fatalf("lock file not created: %v", err)
	}
	// A crash releases every lock.
	c := m.CrashClone()
	lc, err := c.Lock("LOCK")
	if err != nil {
		t.Fatalf("lock on the clone: %v", err)
	}
	lc.Close()
	l.Close()
	l2, err := m.Lock("LOCK")
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	l2.Close()
}

func TestMemCloneIsIndependent(t *testing.T) {
	m := NewMem()
	memWrite(t, m, "f", "one", true)
	mustSyncDir(t, m, "/")
	c := m.CrashClone()
	f, _ := c.OpenReadWrite("f")
	f.Write([]byte("+clone"))
	f.Close()
	wantContent(t, m, "f", "one")
	wantContent(t, c, "f", "one+clone")
	memWrite(t, m, "f", "two", true)
	wantContent(t, c, "f", "one+clone")
}

func TestMemCloneKeepsEverything(t *testing.T) {
	m := NewMem()
	m.MkdirAll("d", 0o755)
	f, _ := m.Create("d/f")
	f.Write([]byte("unsynced"))
	c := m.Clone() // a process crash: nothing synced, nothing lost
	wantContent(t, c, "d/f", "unsynced")
	// In the clone everything is durable.
	wantContent(t, c.CrashClone(), "d/f", "unsynced")
	f.Write([]byte("+more"))
	wantContent(t, c, "d/f", "unsynced")
	f.Close()
}

func TestMemCrashCloneRandom(t *testing.T) {
	m := NewMem()
	f, _ := m.Create("f")
	f.Write([]byte("sync"))
	f.Sync()
	f.Write([]byte("tail"))
	mustSyncDir(t, m, "/")
	memWrite(t, m, "new", "n", true) // an unsynced entry
	seen := map[string]bool{}
	seenNew := map[bool]bool{}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		c := m.CrashCloneRandom(r)
		got := content(t, c, "f")
		if !bytes.HasPrefix([]byte("synctail"), []byte(got)) || len(got) < 4 {
			t.Fatalf("f after crash is %q, want sync plus a prefix of tail", got)
		}
		seen[got] = true
		seenNew[content(t, c, "new") == "n"] = true
	}
	if len(seen) != 5 || len(seenNew) != 2 {
		t.Fatalf("random crashes left f as %v and new present %v", seen, seenNew)
	}
}

// TestMemWriteFileAtomicCrash stops WriteFileAtomic after each of its
// operations in turn and crashes: the file is the old content or the new,
// never a mix and never missing.
func TestMemWriteFileAtomicCrash(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	done := false
	for n := int64(0); !done; n++ {
		m := NewMem()
		m.MkdirAll("/db", 0o755)
		mustSyncDir(t, m, "/")
		if err := WriteFileAtomic(m, "/db/MANIFEST", []byte("old contents")); err != nil {
			t.Fatal(err)
		}
		oi := &OnIndex{N: n, Sticky: true}
		err := WriteFileAtomic(Inject(m, oi.Injector()), "/db/MANIFEST", []byte("the new contents"))
		done = err == nil
		if !done && !errors.Is(err, ErrInjected) {
			t.Fatalf("stop at op %d: %v", n, err)
		}
		check := func(c *MemFS, what string) string {
			got := content(t, c, "/db/MANIFEST")
			if got != "old contents" && got != "the new contents" {
				t.Fatalf("stop at op %d, %s: MANIFEST is %q", n, what, got)
			}
			return got
		}
		if got := check(m.CrashClone(), "crash"); done && got != "the new contents" {
			t.Fatalf("a completed WriteFileAtomic did not survive a crash: %q", got)
		}
		for i := range 20 {
			check(m.CrashCloneRandom(r), fmt.Sprintf("random crash %d", i))
		}
	}
}

// TestMemNonAtomicReplaceCanTear is the control for the test above: a
// replace without the temp file and rename can leave a mix.
func TestMemNonAtomicReplaceCanTear(t *testing.T) {
	m := NewMem()
	memWrite(t, m, "f", "old", true)
	mustSyncDir(t, m, "/")
	f, _ := m.Create("f")
	f.Write([]byte("new"))
	if got := content(t, m.CrashClone(), "f"); got != "old" {
		t.Fatalf("got %q", got)
	}
	seen := map[string]bool{}
	r := rand.New(rand.NewPCG(5, 6))
	for range 100 {
		seen[content(t, m.CrashCloneRandom(r), "f")] = true
	}
	if !seen[""] && !seen["n"] && !seen["ne"] {
		t.Fatalf("random crashes of a torn replace only gave %v", seen)
	}
}

func TestMemConcurrent(t *testing.T) {
	m := NewMem()
	m.MkdirAll("d", 0o755)
	mustSyncDir(t, m, "/")
	const writers, rounds = 4, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			name := fmt.Sprintf("d/%d", w)
			f, err := m.Create(name)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			if err := m.SyncDir("d"); err != nil {
				t.Error(err)
				return
			}
			for i := range rounds {
				f.Write([]byte{byte(i)})
				if i%3 == 0 {
					f.Sync()
				}
				buf := make([]byte, 1)
				if _, err := f.ReadAt(buf, int64(i)); err != nil || buf[0] != byte(i) {
					t.Errorf("%s: ReadAt(%d) = %v %v", name, i, buf, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range rounds {
			c := m.CrashClone()
			names, _ := c.ReadDir("d")
			for _, n := range names {
				b, err := ReadFile(c, "d/"+n)
				if err != nil {
					t.Error(err)
					return
				}
				for i, x := range b {
					if x != byte(i) {
						t.Errorf("clone d/%s byte %d is %d", n, i, x)
						return
					}
				}
			}
			m.ReadDir("d")
		}
	})
	wg.Wait()
	for w := range writers {
		if fi, err := m.Stat(fmt.Sprintf("d/%d", w)); err != nil || fi.Size() != rounds {
			t.Fatalf("file %d: %v %v", w, fi, err)
		}
	}
}
