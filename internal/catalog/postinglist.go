package catalog

// postingList is a list of postings kept in chunks that double in size up
// to postingChunkMax. A key of a million values (a device id) gets a
// million fresh postings between two queries: one slice grown by append
// would copy its pointers about five times over; the chunks are filled in
// place and only copied once, sorted, when a reader merges them.
type postingList struct {
	chunks [][]*posting
	n      int
}

const (
	postingChunkMin = 4
	postingChunkMax = 4096
)

func (l *postingList) push(p *posting) {
	k := len(l.chunks)
	if k == 0 || len(l.chunks[k-1]) == cap(l.chunks[k-1]) {
		size := postingChunkMin
		if k > 0 {
			size = min(2*cap(l.chunks[k-1]), postingChunkMax)
		}
		l.chunks = append(l.chunks, make([]*posting, 0, size))
		k++
	}
	l.chunks[k-1] = append(l.chunks[k-1], p)
	l.n++
}

// appendTo appends the postings to dst, in the order pushed.
func (l *postingList) appendTo(dst []*posting) []*posting {
	for _, c := range l.chunks {
		dst = append(dst, c...)
	}
	return dst
}
