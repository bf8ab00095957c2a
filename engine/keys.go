package engine

import (
	"slices"
	"strings"
	"unsafe"
)

// The keys of the series a batch creates are built in a scratch buffer of
// the writer (the Appender's, or the DB's for Write) and handed to the
// catalog, which keeps them, in one string per batch (ownKeys): a string
// per key rounded each up to its size class (a 52-byte key takes 64
// bytes), and the scratch copy of the WAL record's keys was a second
// buffer as large as the batch's keys.

// carveKey appends key to *buf and returns a string of those bytes. The
// string is a view of the buffer: it is valid until the buffer is reused
// from its start, so it must not outlive the batch (ownKeys replaces it
// before the catalog keeps it). The buffer doubles when full, so filling
// it allocates about twice its final size once, not five times; bytes
// already carved are never written again, so views into an outgrown
// array stay valid.
func carveKey(buf *[]byte, key []byte) string {
	if len(key) == 0 {
		return ""
	}
	b := *buf
	if cap(b)-len(b) < len(key) {
		b = slices.Grow(b, max(len(key), cap(b), 256))
	}
	start := len(b)
	b = append(b, key...)
	*buf = b
	return unsafe.String(&b[start], len(key))
}

// ownKeys gives the keys of pend, views of a scratch buffer, one string
// of their own: each key becomes a substring of it.
func ownKeys(pend []pendingSeries) {
	n := 0
	for i := range pend {
		n += len(pend[i].key)
	}
	var b strings.Builder
	b.Grow(n)
	for i := range pend {
		b.WriteString(pend[i].key)
	}
	all := b.String()
	for i := range pend {
		k := len(pend[i].key)
		pend[i].key, all = all[:k], all[k:]
	}
}
