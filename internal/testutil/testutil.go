// Package testutil holds the helpers that tests and benchmarks of several
// strata packages share. It is imported only by _test.go files.
package testutil

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/point"
)

// RandValue returns a random value of kind k: floats that are exact
// eighths in [-125, 125), ints in [-2^39, 2^39), any uint, either bool, and
// short strings.
func RandValue(rng *rand.Rand, k point.Kind) point.Value {
	switch k {
	case point.KindFloat:
		return point.Float(float64(rng.IntN(2000)-1000) / 8)
	case point.KindInt:
		return point.Int(rng.Int64N(1<<40) - 1<<39)
	case point.KindUint:
		return point.Uint(rng.Uint64())
	case point.KindBool:
		return point.Bool(rng.IntN(2) == 0)
	default:
		return point.String(fmt.Sprintf("s%d", rng.IntN(1000)))
	}
}

// DirBytes returns the bytes of every file below dir, failing tb on error.
func DirBytes(tb testing.TB, dir string) int64 {
	tb.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// WaitForFrame waits until some goroutine's stack holds frame (a function
// as runtime.Stack prints it, such as "wal.(*Log).roll("): how a test
// knows another goroutine has reached a point it cannot signal from,
// without sleeping. It fails tb after a minute.
func WaitForFrame(tb testing.TB, frame string) {
	tb.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(string(buf[:runtime.Stack(buf, true)]), frame) {
		if time.Now().After(deadline) {
			tb.Fatalf("no goroutine reached %s in a minute:\n%s", frame, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
	}
}
