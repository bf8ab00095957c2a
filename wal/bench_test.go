package wal

import (
	"fmt"
	"testing"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/internal/testutil"
)

// iotBatch returns the first n entries of the IoT baseline
// (testutil.IoTWalk) of 1,000 devices, all at one timestamp, then all at
// the next; the first ten series are defined in the batch.
func iotBatch(n int) *Batch {
	const devices = 1000
	b := &Batch{Seq: 12345}
	for i := range min(n, 10) {
		key := point.AppendSeriesKey(nil, testutil.IoTMeasurement, testutil.IoTTags(i), testutil.IoTField)
		b.Series = append(b.Series, SeriesDef{ID: uint64(i), Kind: point.KindFloat, Key: key})
	}
	w := testutil.NewIoTWalk(devices)
	for len(b.Entries) < n {
		t, vals := w.Next()
		for dev, v := range vals[:min(devices, n-len(b.Entries))] {
			b.Entries = append(b.Entries, point.Entry{ID: uint64(dev), Time: t, Value: point.Float(v)})
		}
	}
	return b
}

func BenchmarkBatchMarshal(b *testing.B) {
	batch := iotBatch(10_000)
	dst := batch.Marshal(nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(dst)))
	for b.Loop() {
		dst = batch.Marshal(dst[:0])
	}
	b.ReportMetric(float64(b.N*len(batch.Entries))/b.Elapsed().Seconds(), "entries/s")
	b.ReportMetric(float64(len(dst))/float64(len(batch.Entries)), "B/entry")
}

func BenchmarkBatchUnmarshal(b *testing.B) {
	batch := iotBatch(10_000)
	src := batch.Marshal(nil)
	var got Batch
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if err := got.Unmarshal(src); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch.Entries))/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkAppend measures one writer appending records of a given size in
// each sync mode. Files are removed as they roll so that long runs do not
// fill the disk.
func BenchmarkAppend(b *testing.B) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNever} {
		for _, size := range []int{100, 4 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("sync=%v/size=%d", mode, size), func(b *testing.B) {
				l, err := Open(b.TempDir(), Options{Sync: mode, SegmentBytes: 16 << 20})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				payload := make([]byte, size)
				for i := range payload {
					payload[i] = byte(i)
				}
				b.ReportAllocs()
				b.SetBytes(int64(size))
				var last uint64
				for b.Loop() {
					pos, err := l.Append(RecordBatch, payload)
					if err != nil {
						b.Fatal(err)
					}
					if pos.File != last {
						last = pos.File
						if err := l.RemoveBefore(last); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}
