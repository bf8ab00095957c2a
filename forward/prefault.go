package forward

import (
	"sync"
	"sync/atomic"
)

// prefaulter maps the pages of the active file's mapping in the background
// ahead of the writer (populate, MADV_POPULATE_WRITE on Linux), so that
// appending a frame is a copy into pages already mapped, not a page fault
// every 4 KiB under the database's commit lock. It only ever maps pages as
// if for writing and never changes their contents, so it cannot disturb
// bytes the writer is copying meanwhile. Where populate is not supported
// the writer faults the pages in itself, as without it. Its thread runs at
// a lower priority (yieldCPU).
type prefaulter struct {
	want atomic.Int64 // bytes of the mapping the writer wants mapped
	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup

	mu          sync.Mutex
	m           []byte // the mapping, nil when none
	done        int64  // mapped up to (page aligned)
	unsupported bool
}

const (
	// prefaultAhead is how far ahead of the writer pages are mapped: a
	// fraction of a second of the fastest ingest, little to write back.
	prefaultAhead = 1 << 20
	// prefaultChunk is mapped at once (some 50 µs); a roll waits for at
	// most one.
	prefaultChunk = 64 << 10
)

func newPrefaulter() *prefaulter {
	p := &prefaulter{wake: make(chan struct{}, 1), stop: make(chan struct{})}
	p.wg.Go(p.run)
	return p
}

func (p *prefaulter) run() {
	yieldCPU() // background work: if it lags, the writer faults pages in itself
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		}
		for p.step() {
		}
	}
}

// step maps the next chunk wanted; it returns false when there is none.
func (p *prefaulter) step() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	want := min(p.want.Load(), int64(len(p.m)))
	if p.m == nil || p.unsupported || p.done >= want {
		return false
	}
	end := min(p.done+prefaultChunk, want)
	if err := populate(p.m[p.done:end]); err != nil {
		p.unsupported = true // an old kernel: the writer faults pages in
		return false
	}
	p.done = roundUp(end, pageSize)
	return true
}

// set makes m the mapping to map pages of (nil: none). The caller holds
// the queue's wmu.
func (p *prefaulter) set(m []byte) {
	p.mu.Lock()
	p.m, p.done = m, 0
	p.want.Store(0)
	p.mu.Unlock()
}

// ask wants the pages up to end mapped. The caller holds the queue's wmu.
func (p *prefaulter) ask(end int64) {
	p.want.Store(end)
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// rewind forgets that the pages from off on are mapped writable: an fsync
// cleaned them, and a write to them faults again.
func (p *prefaulter) rewind(off int64) {
	p.mu.Lock()
	p.done = min(p.done, off/pageSize*pageSize)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *prefaulter) close() {
	close(p.stop)
	p.wg.Wait()
}
