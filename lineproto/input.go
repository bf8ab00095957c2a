package lineproto

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// Errors that input.Read returns to the writer through its bufio.Reader,
// which hands them back with the bytes it holds and then reads on.
var (
	// errLinger: the input is idle and the linger deadline has passed.
	errLinger = errors.New("lineproto: input idle")
	// errStop: the context was cancelled.
	errStop = errors.New("lineproto: stopped")
)

const (
	// inputBufs buffers of inputBufSize bytes circulate between the reading
	// goroutine and the writer.
	inputBufs    = 2
	inputBufSize = 64 << 10
	// maxEmptyReads is how many reads in a row may return no bytes and no
	// error before r is deemed broken, as in bufio.
	maxEmptyReads = 100
)

// input reads r in a goroutine of its own, so that the writer can stop
// waiting for bytes when ctx is cancelled or when what it holds must be
// written (the linger deadline), while a Read of r blocks.
//
// Once ctx is cancelled the input drains: it hands over the bytes already
// read from r, and those of a Read that has returned, then reports errStop
// instead of waiting for a Read that blocks. The goroutine starts no Read
// after that.
type input struct {
	ctx  context.Context
	data chan []byte   // buffers filled by the goroutine
	free chan []byte   // buffers it may fill
	done chan struct{} // closed when Write returns
	err  error         // r's error, set before data is closed

	mu       sync.Mutex
	stopped  bool // no Read of r may start
	reading  bool // the goroutine is inside a Read of r
	draining bool // the writer's view of stopped

	cur []byte // the unread rest of buf
	buf []byte // the buffer being read by the writer, to give back

	// deadline is when the writer must write what it holds, or zero when
	// it holds nothing. The writer sets it; only its goroutine reads it.
	deadline time.Time
	timer    *time.Timer
}

func newInput(ctx context.Context, r io.Reader) *input {
	in := &input{
		ctx:  ctx,
		data: make(chan []byte, inputBufs),
		free: make(chan []byte, inputBufs),
		done: make(chan struct{}),
	}
	for range inputBufs {
		in.free <- make([]byte, inputBufSize)
	}
	go in.readLoop(r)
	return in
}

// readLoop fills free buffers from r and hands them over, until r fails or
// ends, or Write returns.
func (in *input) readLoop(r io.Reader) {
	defer close(in.data)
	for {
		var buf []byte
		select {
		case buf = <-in.free:
		case <-in.done:
			return
		}
		in.mu.Lock()
		if in.stopped {
			in.mu.Unlock()
			return
		}
		in.reading = true
		in.mu.Unlock()
		n, err := r.Read(buf[:cap(buf)])
		for i := 0; n == 0 && err == nil; i++ {
			if i == maxEmptyReads {
				err = io.ErrNoProgress
				break
			}
			n, err = r.Read(buf[:cap(buf)])
		}
		in.mu.Lock()
		in.reading = false
		in.mu.Unlock()
		if n > 0 {
			select {
			case in.data <- buf[:n]:
			case <-in.done:
				return
			}
		}
		if err != nil {
			in.err = err
			return
		}
	}
}

// close tells the reading goroutine to end. It ends at once unless it is
// inside a Read of r; then it ends when that Read returns.
func (in *input) close() {
	close(in.done)
	if in.timer != nil {
		in.timer.Stop()
	}
}

// Read implements io.Reader for the writer's bufio.Reader. Besides r's own
// errors, it returns errStop when ctx is cancelled and errLinger when the
// deadline passes while it waits for bytes.
func (in *input) Read(p []byte) (int, error) {
	if len(in.cur) == 0 {
		if in.buf != nil {
			in.free <- in.buf // never blocks: there are inputBufs slots
			in.buf = nil
		}
		if err := in.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, in.cur)
	in.cur = in.cur[n:]
	return n, nil
}

// drain makes the input hand over what was read and then errStop.
func (in *input) drain() {
	if in.draining {
		return
	}
	in.draining = true
	in.mu.Lock()
	in.stopped = true
	in.mu.Unlock()
}

// next waits for the next filled buffer.
func (in *input) next() error {
	if in.draining {
		return in.nextDraining()
	}
	select {
	case buf, ok := <-in.data:
		return in.take(buf, ok)
	default:
	}
	// Nothing to read now: the wait may be long.
	var linger <-chan time.Time
	if !in.deadline.IsZero() {
		d := time.Until(in.deadline)
		if d <= 0 {
			return errLinger
		}
		if in.timer == nil {
			in.timer = time.NewTimer(d)
		} else {
			in.timer.Reset(d)
		}
		linger = in.timer.C
		defer in.timer.Stop()
	}
	select {
	case buf, ok := <-in.data:
		return in.take(buf, ok)
	case <-in.ctx.Done():
		in.drain()
		return in.nextDraining()
	case <-linger:
		return errLinger
	}
}

// nextDraining returns a buffer read before the input started draining or
// by a Read that has returned since, and errStop once there is none.
func (in *input) nextDraining() error {
	select {
	case buf, ok := <-in.data:
		if !ok {
			return errStop
		}
		return in.take(buf, ok)
	default:
	}
	in.mu.Lock()
	reading := in.reading
	in.mu.Unlock()
	if reading {
		return errStop // do not wait for a Read that may block
	}
	// The goroutine starts no Read now: it hands over what it holds, if
	// anything, and ends.
	buf, ok := <-in.data
	if !ok {
		return errStop
	}
	return in.take(buf, ok)
}

func (in *input) take(buf []byte, ok bool) error {
	if !ok {
		if in.err != nil {
			return in.err
		}
		return io.EOF
	}
	in.cur, in.buf = buf, buf
	return nil
}
