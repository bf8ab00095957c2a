package bench

// PeakRSS exports peakRSS to the package's external tests.
var PeakRSS = peakRSS
