package engine

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"testing"
)

// writerDirEnv, when set, makes the test binary a writer process for
// TestReadOnlyBesideWriterProcess instead of running the tests.
const writerDirEnv = "STRATA_TEST_WRITER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(writerDirEnv); dir != "" {
		os.Exit(runWriterProcess(dir))
	}
	if dir := os.Getenv(checkpointerDirEnv); dir != "" {
		os.Exit(runCheckpointerProcess(dir))
	}
	os.Exit(m.Run())
}

// writerBatch is the number of points per Write of the writer process:
// batch i holds times writerBatch*i .. writerBatch*(i+1)-1 of series "w v".
const writerBatch = 20

// runWriterProcess writes batches to dir, flushing and compacting often,
// until its stdin closes; it prints "ready" after its first batches and
// "done N" with the number of batches written after Close.
func runWriterProcess(dir string) int {
	opts := &Options{
		Logger:              slog.New(slog.DiscardHandler),
		MemTableBytes:       16 << 10,
		WALSegmentBytes:     4 << 10,
		L0CompactionTrigger: 2,
		Sync:                SyncNever,
	}
	db, err := Open(dir, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "writer: open:", err)
		return 1
	}
	stop := make(chan struct{})
	go func() {
		bufio.NewReader(os.Stdin).ReadString('\n')
		close(stop)
	}()
	n := 0
	pts := make([]Point, writerBatch)
	for ; ; n++ {
		select {
		case <-stop:
			st := db.Stats()
			if err := db.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "writer: close:", err)
				return 1
			}
			fmt.Printf("done %d %d %d\n", n, st.Flushes, st.Compactions)
			return 0
		default:
		}
		for j := range pts {
			tm := int64(writerBatch*n + j)
			pts[j] = Point{Measurement: "w", Fields: []Field{{Key: "v", Value: Int(tm)}}, Time: tm}
		}
		if err := db.Write(pts); err != nil {
			fmt.Fprintln(os.Stderr, "writer: write:", err)
			return 1
		}
		if n == 100 {
			fmt.Println("ready")
		}
	}
}
