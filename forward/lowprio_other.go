//go:build !linux

package forward

// yieldCPU does nothing off Linux: background work runs at the process's
// priority.
func yieldCPU() {}
