package lineproto

// SetReadBufSize sets the size of the read buffer, so that tests can cut
// lines into pieces, and returns a function that restores it.
func SetReadBufSize(n int) (restore func()) {
	old := readBufSize
	readBufSize = n
	return func() { readBufSize = old }
}
