//go:build unix

package testutil

import (
	"syscall"
	"time"
)

// CPUTime returns the CPU time (user + system) the process has used, so
// benchmarks can report throughput per CPU-second, which other load on the
// machine does not skew the way it skews wall time.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
