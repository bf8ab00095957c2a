//go:build !linux

package forward

import "time"

// threadCPU is not measured on this platform: it returns 0.
func threadCPU() time.Duration { return 0 }

// syncAll is sync(2) where there is one; here it does nothing.
func syncAll() {}
