// Package forward delivers what a strata database stores to a central,
// distributed engine over Prometheus remote write 1.0 or InfluxDB line
// protocol (docs/design.md, "Forwarding"). It lives in its
// own module so that the library stays free of its protocol dependencies.
//
// # Use
//
//	db, _ := engine.Open(dir, nil)
//	f, err := forward.New(db, forward.Options{URL: "http://vm:8428/api/v1/write", Protocol: forward.Prometheus})
//	...
//	f.Start()
//	defer f.Close() // before db.Close
//
// New must run before the first write after Open: it subscribes to the
// database's change feed (engine.DB.Subscribe) and queues every batch
// logged from then on.
//
// # Guarantees
//
// Every point the database stores after New reaches the remote at least
// once, in write order per series: batches are queued on disk before their
// WAL record is written, delivered one request at a time, and the delivered
// position is kept in a cursor file. A kill -9 at any instant loses
// nothing: after the restart, a queued batch the database never logged
// (its sequence number is past engine.FeedInfo.RecoveredSeq) is cut off, and
// delivery resumes at the cursor; the batch in flight at the crash may be
// sent twice. Network errors, 5xx and 429 are retried with jittered
// exponential backoff (honouring Retry-After); another 4xx drops its batch.
// Over the prometheus protocol a refused batch is first sent once more
// without the samples behind their series' newest (a backfill, which a
// receiver without an out-of-order window refuses with the whole request),
// so that only those are dropped.
// Past MaxBacklogBytes or MaxBacklogAge the oldest undelivered queue file
// is dropped. Every drop is counted in Stats and logged; the database
// itself never loses anything to forwarding.
//
// # Failures
//
// The forwarder never stops the database from starting or writing:
//
//   - A queue that cannot be written (a full disk) drops the batches it
//     cannot keep, counted in Stats.DroppedQueue and logged once a run; a
//     file that could not be written is finished, and removed as soon as
//     it is delivered, so that delivery frees the space; the writer tries
//     to start a new file as soon as a delivered one is removed (otherwise
//     once a second), and queues again by itself once it can. New
//     succeeds on a full disk (forwarding then waits for space, counted
//     the same way).
//   - Damage found when the queue opens is skipped to the next good frame
//     and its samples counted in DroppedQueue and logged with the file and
//     offset: exactly, from the checksummed frame headers and the running
//     sample count each frame carries, whether a frame, a run of frames or
//     a whole file (a removed file, or one set aside as *.damaged because
//     its header is damaged) is missing. Damage where the cursor says the
//     data was delivered is not a loss. The bounds: frames cut off the end
//     of the newest file (a torn tail) whose headers are gone, and a removed
//     or truncated-to-nothing oldest or newest file, leave nothing to count
//     them by and are logged, not counted; where the acknowledged position
//     lies inside damaged data, the count is an upper bound (said so in the
//     log). Damage that appears while running drops the rest of its file,
//     counted exactly.
//   - A write whose WAL fsync fails is undone by the database and is not
//     forwarded: the sender waits until the engine resolves each batch
//     (engine.FeedResolver) and skips those it undid.
//   - MaxBacklogAge holds while writes go on: the active queue file is
//     finished when its first batch is MaxBacklogAge/8 old, so that data is
//     dropped for age at most an eighth late.
//
// # Delivery policy
//
// Delivery yields to local writes, within a bound: while writes keep
// coming, a full batch is held until its oldest sample has waited Linger,
// and it goes at once when they pause, so that a burst is written at full
// speed and delivered after it, and writes that never pause still see
// delivery at most about Linger behind them. On Linux the sender runs on a
// thread of its own at a lower priority (nice 10), so that on contended
// cores the writes run first; on a machine whose CPU is saturated,
// delivery may fall further behind than Linger.
//
// # Metrics
//
// Stats returns the counts; Stats.Metrics describes them as strata_forward_*
// Prometheus metrics without a client library, for a server's /metrics
// (WriteMetrics writes them in the text format).
package forward
