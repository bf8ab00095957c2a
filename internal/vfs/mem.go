package vfs

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemFS is an in-memory FS that models what survives a power loss, for
// tests. Directory entries and file contents (inodes) are kept apart:
//
//   - a file's bytes are durable only up to its last Sync: every inode keeps
//     a synced copy of its data next to the live one;
//   - a directory's entries (creations, renames, removals, and the entries
//     of directories MkdirAll made) are durable only after SyncDir of that
//     directory: every directory keeps a synced copy of its entry map.
//
// CrashClone returns the filesystem a power loss would leave now: the
// durable entries, each pointing at an inode that holds its synced bytes. A
// directory whose own entry is not durable vanishes with its contents. The
// root directory always exists.
//
// Paths are cleaned and a leading "/" is ignored, so "/db/x" and "db/x"
// name the same file. A MemFS is safe for concurrent use: one mutex guards
// the whole tree, so CrashClone is atomic with respect to every other
// operation.
type MemFS struct {
	mu    sync.Mutex
	root  *memNode
	locks map[string]bool // cleaned name -> held
	// capacity bounds the bytes of the files in the tree (0: none): see
	// SetCapacity.
	capacity int64
}

// memNode is an inode: a file or a directory.
type memNode struct {
	dir bool

	// Files.
	data   []byte
	synced []byte // the bytes the last Sync made durable
	// same is the length of the prefix of data known to equal synced, so
	// Sync copies only what changed.
	same int

	// Directories.
	children       map[string]*memNode
	syncedChildren map[string]*memNode // the entries the last SyncDir made durable
}

func newMemDir() *memNode {
	return &memNode{dir: true, children: make(map[string]*memNode), syncedChildren: make(map[string]*memNode)}
}

// NewMem returns an empty MemFS holding only its root directory.
func NewMem() *MemFS {
	return &MemFS{root: newMemDir(), locks: make(map[string]bool)}
}

var _ FS = (*MemFS)(nil)

// split returns the components of name; none for the root.
func split(name string) ([]string, error) {
	clean := strings.TrimLeft(filepath.ToSlash(filepath.Clean(name)), "/")
	if clean == "" || clean == "." {
		return nil, nil
	}
	parts := strings.Split(clean, "/")
	if slices.Contains(parts, "..") {
		return nil, fs.ErrInvalid
	}
	return parts, nil
}

// walk returns the node at parts. The caller holds mu.
func (m *MemFS) walk(parts []string) (*memNode, error) {
	n := m.root
	for _, p := range parts {
		if !n.dir {
			return nil, syscall.ENOTDIR
		}
		c, ok := n.children[p]
		if !ok {
			return nil, fs.ErrNotExist
		}
		n = c
	}
	return n, nil
}

// lookup returns the node name names. The caller holds mu.
func (m *MemFS) lookup(op, name string) (*memNode, error) {
	parts, err := split(name)
	if err != nil {
		return nil, &os.PathError{Op: op, Path: name, Err: err}
	}
	n, err := m.walk(parts)
	if err != nil {
		return nil, &os.PathError{Op: op, Path: name, Err: err}
	}
	return n, nil
}

// lookupParent returns the directory that holds name and name's last
// component. The caller holds mu.
func (m *MemFS) lookupParent(op, name string) (*memNode, string, error) {
	parts, err := split(name)
	if err == nil && len(parts) == 0 {
		err = fs.ErrInvalid // the root has no parent entry
	}
	if err != nil {
		return nil, "", &os.PathError{Op: op, Path: name, Err: err}
	}
	dir, err := m.walk(parts[:len(parts)-1])
	if err == nil && !dir.dir {
		err = syscall.ENOTDIR
	}
	if err != nil {
		return nil, "", &os.PathError{Op: op, Path: name, Err: err}
	}
	return dir, parts[len(parts)-1], nil
}

// Create creates or truncates name. Truncating an existing file keeps its
// inode, so its synced bytes survive a crash until the next Sync.
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.lookupParent("open", name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.children[base]
	switch {
	case !ok:
		n = &memNode{}
		dir.children[base] = n
	case n.dir:
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	default:
		n.truncate(0)
	}
	return &memFile{fs: m, node: n, name: name, write: true}, nil
}

// Open opens an existing file read-only.
func (m *MemFS) Open(name string) (File, error) { return m.open("open", name, false) }

// OpenReadWrite opens an existing file for reading and appending.
func (m *MemFS) OpenReadWrite(name string) (File, error) { return m.open("open", name, true) }

func (m *MemFS) open(op, name string, write bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(op, name)
	if err != nil {
		return nil, err
	}
	if n.dir {
		return nil, &os.PathError{Op: op, Path: name, Err: syscall.EISDIR}
	}
	return &memFile{fs: m, node: n, name: name, write: write, append: write}, nil
}

// Rename moves oldname's entry to newname, replacing a file there.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	fail := func(err error) error { return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err} }
	odir, obase, err := m.lookupParent("rename", oldname)
	if err != nil {
		return fail(err.(*os.PathError).Err)
	}
	n, ok := odir.children[obase]
	if !ok {
		return fail(fs.ErrNotExist)
	}
	ndir, nbase, err := m.lookupParent("rename", newname)
	if err != nil {
		return fail(err.(*os.PathError).Err)
	}
	if old, ok := ndir.children[nbase]; ok {
		if old == n {
			return nil
		}
		if old.dir {
			return fail(syscall.EISDIR)
		}
		if n.dir {
			return fail(syscall.ENOTDIR)
		}
	}
	if n.dir && m.contains(n, ndir) {
		return fail(fs.ErrInvalid) // a directory cannot move into itself
	}
	delete(odir.children, obase)
	ndir.children[nbase] = n
	return nil
}

// contains reports whether d is dir or lies under it. The caller holds mu.
func (m *MemFS) contains(dir, d *memNode) bool {
	if dir == d {
		return true
	}
	for _, c := range dir.children {
		if c.dir && m.contains(c, d) {
			return true
		}
	}
	return false
}

// Remove removes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.lookupParent("remove", name)
	if err != nil {
		return err
	}
	n, ok := dir.children[base]
	if !ok {
		return &os.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(n.children) > 0 {
		return &os.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	delete(dir.children, base)
	return nil
}

// MkdirAll creates dir and any missing parents. Each new directory's entry
// in its parent is durable only after SyncDir of the parent.
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	parts, err := split(dir)
	if err != nil {
		return &os.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	n := m.root
	for _, p := range parts {
		c, ok := n.children[p]
		if !ok {
			c = newMemDir()
			n.children[p] = c
		} else if !c.dir {
			return &os.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		n = c
	}
	return nil
}

// ReadDir returns the sorted names of dir's entries.
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("readdir", dir)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: syscall.ENOTDIR}
	}
	return slices.Sorted(maps.Keys(n.children)), nil
}

// Stat describes name.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return n.info(name), nil
}

// SyncDir makes dir's current entries durable.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("sync", dir)
	if err != nil {
		return err
	}
	if !n.dir {
		return &os.PathError{Op: "sync", Path: dir, Err: syscall.ENOTDIR}
	}
	n.syncedChildren = maps.Clone(n.children)
	return nil
}

// Lock takes an in-memory exclusive lock on name, creating the file if it
// is missing, as the operating system's Lock does. Locks do not survive
// CrashClone: the process that held them is gone.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.lookupParent("lock", name)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if n, ok := dir.children[base]; !ok {
		dir.children[base] = &memNode{}
	} else if n.dir {
		return nil, fmt.Errorf("lock %s: %w", name, syscall.EISDIR)
	}
	key := strings.Join(mustSplit(name), "/")
	if m.locks[key] {
		return nil, fmt.Errorf("%w: lock %s", ErrLocked, name)
	}
	m.locks[key] = true
	return &memLock{fs: m, key: key}, nil
}

// mustSplit splits a name lookupParent already accepted.
func mustSplit(name string) []string {
	parts, _ := split(name)
	return parts
}

type memLock struct {
	fs   *MemFS
	key  string
	once sync.Once
}

func (l *memLock) Close() error {
	l.once.Do(func() {
		l.fs.mu.Lock()
		delete(l.fs.locks, l.key)
		l.fs.mu.Unlock()
	})
	return nil
}

// CrashClone returns a new MemFS holding what would survive a power loss
// now: the durable directory entries, each pointing at an inode holding
// only its synced bytes. The receiver is unchanged and stays usable.
func (m *MemFS) CrashClone() *MemFS {
	return m.crashClone(nil)
}

// CrashCloneRandom is CrashClone for a disk that wrote back part of what
// was not synced yet: each file keeps its synced bytes plus a random prefix
// of its unsynced tail (or, when it was truncated or rewritten since its
// last Sync, either its synced bytes or a random prefix of its current
// ones), and each directory keeps or drops each unsynced entry change at
// random, independently.
func (m *MemFS) CrashCloneRandom(r *rand.Rand) *MemFS {
	return m.crashClone(r)
}

// Clone returns a new MemFS holding everything the receiver holds now,
// synced or not, as a process crash (kill -9) leaves it: the operating
// system keeps what was written. In the clone, everything is synced.
func (m *MemFS) Clone() *MemFS {
	return m.clone(&cloner{all: true})
}

func (m *MemFS) crashClone(r *rand.Rand) *MemFS {
	return m.clone(&cloner{r: r})
}

func (m *MemFS) clone(c *cloner) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c.seen = make(map[*memNode]*memNode)
	return &MemFS{root: c.clone(m.root), locks: make(map[string]bool), capacity: m.capacity}
}

// cloner copies the tree, keeping one copy per inode.
type cloner struct {
	all  bool       // keep everything, synced or not
	r    *rand.Rand // unless all; nil: keep exactly what is durable
	seen map[*memNode]*memNode
}

func (c *cloner) clone(n *memNode) *memNode {
	if cn, ok := c.seen[n]; ok {
		return cn
	}
	if !n.dir {
		data := c.fileData(n)
		cn := &memNode{data: data, synced: bytes.Clone(data), same: len(data)}
		c.seen[n] = cn
		return cn
	}
	cn := newMemDir()
	c.seen[n] = cn
	for _, name := range c.entries(n) {
		child := c.clone(name.node)
		cn.children[name.name] = child
		cn.syncedChildren[name.name] = child
	}
	return cn
}

// fileData returns the bytes a crash leaves in file n.
func (c *cloner) fileData(n *memNode) []byte {
	switch {
	case c.all:
		return bytes.Clone(n.data)
	case c.r == nil:
		return bytes.Clone(n.synced)
	}
	if n.same == len(n.synced) || bytes.HasPrefix(n.data, n.synced) {
		// Only appended to since the last Sync.
		keep := len(n.synced) + c.r.IntN(len(n.data)-len(n.synced)+1)
		return bytes.Clone(n.data[:keep])
	}
	if c.r.IntN(2) == 0 {
		return bytes.Clone(n.synced)
	}
	return bytes.Clone(n.data[:c.r.IntN(len(n.data)+1)])
}

type namedNode struct {
	name string
	node *memNode
}

// entries returns the entries of directory n that a crash leaves.
func (c *cloner) entries(n *memNode) []namedNode {
	var out []namedNode
	if c.all || c.r == nil {
		entries := n.syncedChildren
		if c.all {
			entries = n.children
		}
		for _, name := range slices.Sorted(maps.Keys(entries)) {
			out = append(out, namedNode{name, entries[name]})
		}
		return out
	}
	names := slices.Collect(maps.Keys(n.syncedChildren))
	for name := range n.children {
		if _, ok := n.syncedChildren[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names) // a deterministic order of random draws
	for _, name := range names {
		old, inOld := n.syncedChildren[name]
		cur, inCur := n.children[name]
		if inOld != inCur || old != cur {
			// An unsynced change: keep it or not.
			if c.r.IntN(2) == 0 {
				old, inOld = cur, inCur
			}
		}
		if inOld {
			out = append(out, namedNode{name, old})
		}
	}
	return out
}

func (n *memNode) truncate(size int64) {
	switch {
	case size <= int64(len(n.data)):
		n.data = n.data[:size]
	default:
		n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
	}
	n.same = min(n.same, int(size))
}

func (n *memNode) info(name string) os.FileInfo {
	fi := &memFileInfo{name: filepath.Base(name), mode: 0o644}
	if n.dir {
		fi.mode = fs.ModeDir | 0o755
	} else {
		fi.size = int64(len(n.data))
	}
	return fi
}

type memFileInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func (fi *memFileInfo) Name() string       { return fi.name }
func (fi *memFileInfo) Size() int64        { return fi.size }
func (fi *memFileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi *memFileInfo) ModTime() time.Time { return time.Time{} }
func (fi *memFileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi *memFileInfo) Sys() any           { return nil }

// memFile is an open file: a handle on an inode with its own offset. Its
// state is guarded by the MemFS mutex.
type memFile struct {
	fs     *MemFS
	node   *memNode
	name   string
	write  bool // opened for writing
	append bool // writes go to the end
	off    int64
	closed bool
}

func (f *memFile) check(op string) error {
	if f.closed {
		return &os.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if f.off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[f.off:])
	f.off += int64(n)
	return n, nil
}

// ReadAt reads at off without moving the offset; like os.File it returns
// io.EOF when it reads fewer than len(p) bytes.
func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "readat", Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= int64(len(f.node.data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write"); err != nil {
		return 0, err
	}
	if !f.write {
		return 0, &os.PathError{Op: "write", Path: f.name, Err: syscall.EBADF}
	}
	if f.append {
		f.off = int64(len(f.node.data))
	}
	n, err := f.writeAtLocked(p, f.off)
	f.off += int64(n)
	return n, err
}

// WriteAt writes p at off without moving the offset. Like os.File, it
// refuses a file whose writes go to its end (OpenReadWrite).
func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write"); err != nil {
		return 0, err
	}
	switch {
	case !f.write:
		return 0, &os.PathError{Op: "write", Path: f.name, Err: syscall.EBADF}
	case f.append:
		return 0, &os.PathError{Op: "writeat", Path: f.name, Err: fs.ErrInvalid}
	case off < 0:
		return 0, &os.PathError{Op: "writeat", Path: f.name, Err: fs.ErrInvalid}
	}
	return f.writeAtLocked(p, off)
}

// writeAtLocked stores p at off, as much of it as the capacity leaves room
// for (ENOSPC for the rest). The caller holds the MemFS mutex.
func (f *memFile) writeAtLocked(p []byte, off int64) (int, error) {
	n := f.node
	var err error
	if end := off + int64(len(p)); end > int64(len(n.data)) {
		if room := f.fs.roomLocked(); end-int64(len(n.data)) > room {
			keep := max(int64(len(n.data))+room-off, 0)
			p = p[:min(keep, int64(len(p)))]
			err = &os.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
		}
		if end := off + int64(len(p)); end > int64(len(n.data)) {
			n.truncate(end)
		}
	}
	copy(n.data[off:], p)
	n.same = min(n.same, int(off))
	return len(p), err
}

// SetCapacity makes the MemFS a filesystem of n bytes (0: unbounded): a
// write or a Truncate that would make the files in the tree hold more
// fails with ENOSPC (a write storing what fits first, as a full disk
// does), and removing files makes room again. Directories and files that
// are open but no longer named take no room.
func (m *MemFS) SetCapacity(n int64) {
	m.mu.Lock()
	m.capacity = n
	m.mu.Unlock()
}

// Used returns the bytes the files in the tree hold.
func (m *MemFS) Used() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.usedLocked()
}

func (m *MemFS) usedLocked() int64 {
	var used int64
	seen := make(map[*memNode]bool)
	var walk func(n *memNode)
	walk = func(n *memNode) {
		if seen[n] {
			return
		}
		seen[n] = true
		if !n.dir {
			used += int64(len(n.data))
			return
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(m.root)
	return used
}

// roomLocked is how many bytes the files may still grow by.
func (m *MemFS) roomLocked() int64 {
	if m.capacity <= 0 {
		return 1 << 62
	}
	return max(m.capacity-m.usedLocked(), 0)
}

// Sync makes the file's current bytes durable.
func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync"); err != nil {
		return err
	}
	n := f.node
	n.synced = append(n.synced[:n.same], n.data[n.same:]...)
	n.same = len(n.data)
	return nil
}

func (f *memFile) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat"); err != nil {
		return nil, err
	}
	return f.node.info(f.name), nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate"); err != nil {
		return err
	}
	if !f.write {
		return &os.PathError{Op: "truncate", Path: f.name, Err: syscall.EINVAL}
	}
	if size < 0 {
		return &os.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	if grow := size - int64(len(f.node.data)); grow > 0 && grow > f.fs.roomLocked() {
		return &os.PathError{Op: "truncate", Path: f.name, Err: syscall.ENOSPC}
	}
	f.node.truncate(size)
	return nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("close"); err != nil {
		return err
	}
	f.closed = true
	return nil
}
