// Package lint holds repository-wide checks that run as ordinary tests.
package lint

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// rawAtomic matches calls of the sync/atomic functions on plain integers.
var rawAtomic = regexp.MustCompile(`\batomic\.(Add|Load|Store|Swap|CompareAndSwap)(Int32|Int64|Uint32|Uint64|Uintptr|Pointer)\(`)

// TestTypedAtomics rejects raw atomic calls: use atomic.Int64 and friends,
// whose zero values are ready and which cannot be read non-atomically.
func TestTypedAtomics(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if rawAtomic.MatchString(line) {
				t.Errorf("%s:%d: use typed atomics (atomic.Int64, ...) instead of %s", path, i+1, rawAtomic.FindString(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
