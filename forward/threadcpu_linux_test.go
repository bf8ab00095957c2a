package forward

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time (user + system) the calling OS thread has
// used; callers lock their goroutine to its thread around the span.
func threadCPU() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// syncAll writes back every file system's dirty data (sync(2)).
func syncAll() { syscall.Sync() }
