//go:build unix

package engine

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user + system) the process has used, so
// benchmarks can report throughput per CPU-second, which other load on the
// machine does not skew the way it skews wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
