package lineproto

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// Errors that input.readSlice returns with a piece of a line; reading may go
// on after them.
var (
	// errPiece: the line goes on beyond the longest piece.
	errPiece = errors.New("lineproto: line continues")
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

	// mem is the rest of an input already in memory (src, a *bytes.Buffer
	// of total unread bytes), read in place a window at a time, with no
	// goroutine and no copy; close takes the windows handed over from src.
	mem   []byte
	inMem bool
	src   *bytes.Buffer
	total int

	cur   []byte // the unread rest of buf
	buf   []byte // the buffer being read by the writer, to give back
	carry []byte // the start of a line that continues in the next buffer
	cr    bool   // a carriage return was held back from the last piece

	// deadline is when the writer must write what it holds, or zero when
	// it holds nothing. The writer sets it; only its goroutine reads it.
	deadline time.Time
	timer    *time.Timer
}

func newInput(ctx context.Context, r io.Reader) *input {
	if b, ok := r.(*bytes.Buffer); ok {
		// Nothing to wait for: a server's request body, read whole.
		return &input{ctx: ctx, mem: b.Bytes(), inMem: true, src: b, total: b.Len()}
	}
	in := &input{
		ctx:  ctx,
		data: make(chan []byte, inputBufs),
		free: make(chan []byte, inputBufs),
		done: make(chan struct{}),
	}
	for range inputBufs {
		in.free <- bufPool.Get().(*[inputBufSize]byte)[:]
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
			in.free <- buf // for close to recycle; never blocks
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
		} else {
			in.free <- buf // never blocks
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
	if in.inMem {
		in.src.Next(in.total - len(in.mem))
		return
	}
	in.mu.Lock()
	in.stopped = true // no Read of r starts after Write returns
	in.mu.Unlock()
	close(in.done)
	if in.timer != nil {
		in.timer.Stop()
	}
	// Recycle the buffers the goroutine no longer holds; one inside a Read
	// that has not returned is left to the garbage collector.
	recycle := func(b []byte) { bufPool.Put((*[inputBufSize]byte)(b[:inputBufSize])) }
	if in.buf != nil {
		recycle(in.buf)
		in.buf = nil
	}
	for _, c := range []chan []byte{in.free, in.data} {
	drain:
		for {
			select {
			case b, ok := <-c:
				if !ok {
					break drain
				}
				recycle(b)
			default:
				break drain
			}
		}
	}
}

// bufPool holds input buffers, so that many short Writes (an HTTP server's)
// do not each allocate them.
var bufPool = sync.Pool{New: func() any { return new([inputBufSize]byte) }}

// readSlice returns the next line of the input, its newline included, like
// bufio.Reader.ReadSlice, or a piece of it with an error: errPiece when the
// line is longer than max bytes (the piece holds max bytes or one less), and
// the errors of next (errLinger, errStop, io.EOF or r's error) with what
// had arrived of the line. A piece that more of its line may follow (errPiece,
// errLinger, errStop) never ends with a carriage return: whether that ends
// the line depends on the next byte, so it is returned with what follows.
// The slice is valid until the next call.
func (in *input) readSlice(max int) ([]byte, error) {
	if in.cr {
		in.carry = append(in.carry[:0], '\r')
		in.cr = false
	}
	for {
		if len(in.carry) == 0 {
			i := bytes.IndexByte(in.cur, '\n')
			if i >= 0 && i < max {
				seg := in.cur[:i+1]
				in.cur = in.cur[i+1:]
				return seg, nil
			}
			if len(in.cur) >= max {
				// A piece of a long line, from the buffer.
				n := max
				if in.cur[n-1] == '\r' {
					n--
				}
				seg := in.cur[:n]
				in.cur = in.cur[n:]
				return seg, errPiece
			}
			// The rest of the buffer starts a line.
			in.carry = append(in.carry, in.cur...)
			in.cur = in.cur[:0]
		} else if len(in.cur) > 0 {
			room := max - len(in.carry)
			if i := bytes.IndexByte(in.cur, '\n'); i >= 0 && i < room {
				in.carry = append(in.carry, in.cur[:i+1]...)
				in.cur = in.cur[i+1:]
				seg := in.carry
				in.carry = in.carry[:0]
				return seg, nil
			}
			n := min(len(in.cur), room)
			in.carry = append(in.carry, in.cur[:n]...)
			in.cur = in.cur[n:]
		}
		if len(in.carry) >= max {
			return in.carried(errPiece)
		}
		if err := in.next(); err != nil {
			if len(in.carry) == 0 {
				return nil, err
			}
			return in.carried(err)
		}
	}
}

// carried returns the bytes carried over from earlier buffers as a piece
// with err, holding back a final carriage return if more may follow.
func (in *input) carried(err error) ([]byte, error) {
	seg := in.carry
	in.carry = in.carry[:0]
	if (err == errPiece || err == errLinger || err == errStop) && endsWithCR(seg) {
		in.cr = true
		seg = seg[:len(seg)-1]
	}
	return seg, err
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

// next gives back the buffer just read and waits for the next filled one.
func (in *input) next() error {
	if in.inMem {
		return in.nextWindow()
	}
	if in.buf != nil {
		in.free <- in.buf // never blocks: there are inputBufs slots
		in.buf = nil
	}
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

// nextWindow makes the next window of an input in memory the buffer being
// read: up to inputBufSize bytes, cut after a newline when there is one,
// so that lines rarely straddle two windows. Windows stand for the reads
// of a reader: a cancelled Write stops at the end of one (errStop).
func (in *input) nextWindow() error {
	switch {
	case in.draining:
		return errStop
	case len(in.mem) == 0:
		return io.EOF
	}
	n := len(in.mem)
	if n > inputBufSize {
		n = inputBufSize
		if i := bytes.LastIndexByte(in.mem[:n], '\n'); i >= 0 {
			n = i + 1
		}
	}
	in.cur, in.mem = in.mem[:n], in.mem[n:]
	return nil
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
