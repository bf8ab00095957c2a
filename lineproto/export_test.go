package lineproto

// SetReadBufSize sets the size of the read buffer, so that tests can cut
// lines into pieces, and returns a function that restores it.
func SetReadBufSize(n int) (restore func()) {
	old := readBufSize
	readBufSize = n
	return func() { readBufSize = old }
}

// DisableFastPath makes every line go through the decoder, and returns a
// function that restores the fast path.
func DisableFastPath() (restore func()) {
	fastLineOff = true
	return func() { fastLineOff = false }
}
