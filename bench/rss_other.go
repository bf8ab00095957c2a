//go:build !linux

package bench

func resetPeakRSS() {}

// peakRSS is only measured on Linux; elsewhere it reports 0.
func peakRSS() int64 { return 0 }

// currentRSS is only measured on Linux; elsewhere it reports 0.
func currentRSS() int64 { return 0 }
