package forward

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// backgroundNice is the nice value of the forwarder's background threads.
const backgroundNice = 10

// yieldCPU makes the calling goroutine's work yield the CPU to the
// database's writers: it locks the goroutine to its OS thread for the rest
// of its life (the thread ends with it, never serving other goroutines)
// and lowers that thread's priority to backgroundNice, so that where the
// cores are contended the kernel runs the writing threads first and this
// work in what is left. Failing that (a process already nicer), it runs at
// the process's priority.
func yieldCPU() {
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), backgroundNice)
}
