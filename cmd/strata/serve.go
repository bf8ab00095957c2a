package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/alecthomas/units"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/forward"
	"github.com/stratadb/strata/mqtt"
	"github.com/stratadb/strata/server"
)

func init() {
	commands["serve"] = command{
		summary: "serve a database over HTTP: InfluxDB writes, Prometheus remote write and query API",
		run:     runServe,
	}
}

func runServe(args []string) int {
	return serveMain(serveSignals(), args, os.Stderr)
}

// serveSignals returns a context done at the first SIGINT or SIGTERM; a
// second one ends the process at once.
func serveSignals() context.Context {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx
}

const serveUsage = `usage: strata serve --db DIR [--listen 127.0.0.1:8086] [--token T] [flags]

Serve the database in DIR (created if missing) over HTTP:
  POST /api/v2/write, /write    InfluxDB 2.x and 1.x line protocol (gzip accepted)
  POST /api/v1/write            Prometheus remote write 1.0
  POST /api/v1/otlp/v1/metrics  OpenTelemetry metrics over OTLP/HTTP (protobuf or JSON)
  GET|POST /api/v1/query, /api/v1/query_range, /api/v1/series, /api/v1/labels,
       /api/v1/label/<name>/values, /api/v1/status/buildinfo
                                Prometheus HTTP query API (PromQL), for Grafana
  POST /api/v1/read             Prometheus remote read
  GET|POST /api/v1/status/strata
                                the database's live figures (JSON)
  GET  /metrics                 Prometheus metrics of the engine and the server
  POST|PUT /api/v1/admin/snapshot
                                a consistent online copy of the database in DIR.snapshots/<name>
                                (Prometheus' admin snapshot; answers the name)
  GET  /, /ui/...               a page for the operator (its files never need the token)
  GET  /ping, /health           liveness (never need the token)

While it runs, serve keeps its address in DIR/serve.json, so that 'strata backup --db DIR'
asks it for a snapshot; the file is removed at shutdown (a stale one is harmless).

With --forward-url, everything the database stores from then on is also delivered
to a remote (Prometheus remote write or InfluxDB line protocol), through a durable
queue in DIR/forward that survives outages and restarts.

With a token, every other endpoint needs "Authorization: Token T" (or Bearer),
Basic auth with T as the password, or ?p=T. SIGINT or SIGTERM stops accepting
connections, lets requests in flight finish (up to --shutdown-timeout) and
closes the database. Exit status: 0 after a clean shutdown, 1 on failure (a database,
token file or address that cannot be used, requests still in flight after
--shutdown-timeout), 2 bad usage (found before DIR is opened or created).

example:
  strata serve --db ./data --listen 127.0.0.1:8086 --token-file /etc/strata/token
  curl -H "Authorization: Token $(cat /etc/strata/token)" --data-binary 'cpu,host=a usage=0.5' \
       http://127.0.0.1:8086/api/v2/write
  strata serve --db ./data --retention 2160h --retention-rule 'cpu{host=~"edge-.*"}=7d' --retention-rule 'audit=0'
  strata serve --db ./data --retention-rule 'cpu=90d' --rollup 'cpu:1m@7d' --rollup 'cpu{host=~"edge-.*"}:1h@30d'
  strata serve --db ./data --forward-url http://vm:8428/api/v1/write --forward-protocol prometheus`

// serveMain is the serve command. It logs to stderr, including the line
// "strata serve: listening on ADDR" once it accepts connections, and
// returns when ctx is done and the database is closed.
func serveMain(ctx context.Context, args []string, stderr io.Writer) int {
	fs := newFlags("serve", serveUsage, stderr)
	dir := fs.String("db", "", "database directory (required)")
	listen := fs.String("listen", "127.0.0.1:8086", "address to listen on; the default takes connections from this machine only")
	token := fs.String("token", "", "token that clients must present (default: none, no authentication)")
	tokenFile := fs.String("token-file", "", "read the token from this file instead of --token (keeps it out of the process list)")
	maxBody := fs.Int64("max-body-bytes", server.DefaultMaxBodyBytes, "largest request body, after decompression; larger ones are refused with 413")
	syncMode := fs.String("sync", "always", "WAL sync: always (fsync before acknowledging), interval or never")
	syncInterval := fs.Duration("sync-interval", engine.DefaultSyncInterval, "fsync interval for --sync interval")
	memtable := fs.Int64("memtable-bytes", engine.DefaultMemTableBytes, "memtable size at which it is flushed to a segment")
	retention := fs.Duration("retention", 0, "drop samples older than this (0 keeps everything)")
	var rules retentionRuleFlags
	fs.Var(&rules, "retention-rule", "keep the series a rule selects this long, instead of --retention: MEASUREMENT{matchers}=DURATION,\n"+
		"repeatable, the first matching rule wins; the measurement may be empty (every one), matchers as PromQL's,\n"+
		"0 keeps forever, e.g. --retention-rule 'cpu{host=~\"edge-.*\"}=7d' --retention-rule '{tier=\"raw\"}=2d'")
	var rollups rollupRuleFlags
	fs.Var(&rollups, "rollup", "downsample the series a rule selects: samples older than AFTER become one bucket per EVERY\n"+
		"(count, sum, min, max, first, last) at compaction: MEASUREMENT{matchers}:EVERY@AFTER, repeatable; the rules\n"+
		"matching a series cascade, e.g. --rollup 'cpu:1m@7d' --rollup 'cpu:1h@90d' --rollup '{site=\"north\"}:5m@30d'")
	maxDisk := fs.String("max-disk", "", "disk budget: past it, compaction drops the oldest samples until the files are under 90% of it (default: no bound), e.g. --max-disk 10GiB")
	maxSeries := fs.Int("max-series", 0, "refuse writes that would create a series past this many (0: no bound), e.g. --max-series 100000")
	maxSeriesMeas := fs.Int("max-series-per-measurement", 0, "the same per measurement (0: no bound), e.g. --max-series-per-measurement 20000")
	readHeader := fs.Duration("read-header-timeout", 10*time.Second, "time allowed to read a request's headers")
	readTimeout := fs.Duration("read-timeout", time.Minute, "time allowed to read a whole request, body included")
	writeTimeout := fs.Duration("write-timeout", 0, "time allowed to write a response (0: no limit beyond --query-timeout)")
	idle := fs.Duration("idle-timeout", 2*time.Minute, "time a keep-alive connection may stay idle")
	queryTimeout := fs.Duration("query-timeout", server.DefaultQueryTimeout, "longest a PromQL query may run")
	shutdown := fs.Duration("shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long requests in flight may take to finish")
	fwd := addForwardFlags(fs)
	mq := addMQTTFlags(fs)
	if st, done := parseFlags(fs, args); done {
		return st
	}
	// Every usage error is found here, before the database is opened (and
	// so created).
	usageErr := usageFail(fs, stderr)
	switch {
	case *dir == "":
		return usageErr("--db is required")
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q", fs.Arg(0))
	case *token != "" && *tokenFile != "":
		return usageErr("--token and --token-file are exclusive")
	case *maxBody <= 0:
		return usageErr("--max-body-bytes must be positive")
	case *maxSeries < 0 || *maxSeriesMeas < 0:
		return usageErr("--max-series and --max-series-per-measurement must not be negative")
	case *memtable <= 0:
		return usageErr("--memtable-bytes must be positive, not %d", *memtable)
	case *syncInterval <= 0:
		return usageErr("--sync-interval must be positive, not %v", *syncInterval)
	case flagGiven(fs, "sync-interval") && *syncMode != "interval":
		return usageErr("--sync-interval needs --sync interval (--sync is %q)", *syncMode)
	case *retention < 0:
		return usageErr("--retention must not be negative (0 keeps everything), not %v", *retention)
	case *queryTimeout <= 0:
		return usageErr("--query-timeout must be positive, not %v", *queryTimeout)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"read-header-timeout", *readHeader}, {"read-timeout", *readTimeout}, {"write-timeout", *writeTimeout},
		{"idle-timeout", *idle}, {"shutdown-timeout", *shutdown}} {
		if d.v < 0 {
			return usageErr("--%s must not be negative, not %v", d.name, d.v)
		}
	}
	var maxDiskBytes int64
	if *maxDisk != "" {
		// The units Prometheus' --storage.tsdb.retention.size takes: KB and
		// KiB alike are 1024 bytes.
		b, err := units.ParseBase2Bytes(*maxDisk)
		if err != nil || b <= 0 {
			return usageErr("--max-disk %q: want a positive size such as 500MiB or 10GiB", *maxDisk)
		}
		maxDiskBytes = int64(b)
	}
	dbOpts := &engine.Options{SyncInterval: *syncInterval, MemTableBytes: *memtable, Retention: *retention,
		MaxSeries: *maxSeries, MaxSeriesPerMeasurement: *maxSeriesMeas, MaxDiskBytes: maxDiskBytes,
		RetentionRules: rules, Rollups: rollups}
	switch *syncMode {
	case "always":
		dbOpts.Sync = engine.SyncAlways
	case "interval":
		dbOpts.Sync = engine.SyncInterval
	case "never":
		dbOpts.Sync = engine.SyncNever
	default:
		return usageErr("--sync must be always, interval or never, not %q", *syncMode)
	}
	// What the engine would refuse at Open, refused before Open creates DIR.
	valid := dbOpts.Clone()
	valid.EnsureDefaults()
	if err := valid.Validate(); err != nil {
		return usageErr("%v", err)
	}
	if err := fwd.check(fs); err != nil {
		return usageErr("%v", err)
	}
	if err := mq.check(fs); err != nil {
		return usageErr("%v", err)
	}
	fail := failWith(stderr, "serve", exitFailure)
	if *tokenFile != "" {
		var err error
		if *token, err = readTokenFile(*tokenFile); err != nil {
			return fail(err)
		}
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	dbOpts.Logger = logger

	db, err := engine.Open(*dir, dbOpts)
	if err != nil {
		return fail(err)
	}
	// The forwarder starts before anything is written, so that every point
	// stored from now on is queued for the remote.
	f, err := fwd.start(db, logger)
	if err != nil {
		db.Close()
		if errors.Is(err, forward.ErrInvalid) {
			return usageErr("%v", err) // what fwd.check does not foresee
		}
		return fail(err)
	}
	var extra []prometheus.Collector
	if f != nil {
		extra = append(extra, forwardCollector(f))
		fmt.Fprintf(stderr, "strata serve: forwarding to %s (%s)\n", *fwd.url, *fwd.protocol)
	}
	sub, err := mq.subscriber(db, logger)
	if err != nil {
		if f != nil {
			f.Close()
		}
		db.Close()
		if errors.Is(err, mqtt.ErrInvalidOptions) {
			return usageErr("%v", err) // a topic filter mqtt.New refuses
		}
		return fail(err) // a password or TLS file that cannot be read
	}
	if sub != nil {
		extra = append(extra, mqttCollector(sub))
	}
	stopMQTT := runMQTT(sub, logger)
	closeDB := func() int {
		stopMQTT() // before the database closes: unwritten messages stay unacknowledged
		if f != nil {
			// What is not delivered stays queued on disk for the next start.
			if err := f.Close(); err != nil {
				fmt.Fprintln(stderr, "strata serve: close forwarder:", err)
			}
		}
		if err := db.Close(); err != nil {
			return fail(fmt.Errorf("close database: %w", err))
		}
		return 0
	}
	srvOpts := &server.Options{
		Token:        *token,
		MaxBodyBytes: *maxBody,
		Stalled:      server.StalledFunc(dbOpts),
		Logger:       logger,
		QueryTimeout: *queryTimeout,
		Collectors:   extra,
	}
	if f != nil {
		srvOpts.ForwardStatus = forwardStatus(f, *fwd.protocol)
	}
	if sub != nil {
		srvOpts.MQTTStatus = mqttStatus(sub, mq.brokers, mq.topics)
	}
	h, err := server.New(db, srvOpts)
	if err != nil {
		closeDB()
		return fail(err)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		closeDB()
		return fail(err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: *readHeader,
		ReadTimeout:       *readTimeout,
		WriteTimeout:      *writeTimeout,
		IdleTimeout:       *idle,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(func() {
		// Shutdown runs this once its listeners are closed.
		fmt.Fprintln(stderr, "strata serve: stopped accepting connections")
	})
	// serve.json tells 'strata backup' where to ask for a snapshot.
	abs, _ := filepath.Abs(*dir)
	removeInfo, err := writeServeInfo(*dir, serveInfo{
		PID: os.Getpid(), Addr: ln.Addr().String(), DB: abs,
		SnapshotDir: snapshotDirOf(abs), Token: *token != "",
	})
	if err != nil {
		fmt.Fprintf(stderr, "strata serve: write %s (strata backup will take read-only copies): %v\n", serveInfoName, err)
		removeInfo = func() {}
	}
	defer removeInfo()
	fmt.Fprintf(stderr, "strata serve: listening on %s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	status := 0
	select {
	case err := <-errc:
		// Serve only returns on its own for a listener failure.
		fmt.Fprintln(stderr, "strata serve:", err)
		status = exitFailure
	case <-ctx.Done():
		fmt.Fprintln(stderr, "strata serve: shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), *shutdown)
		err := srv.Shutdown(sctx)
		cancel()
		if err != nil {
			fmt.Fprintln(stderr, "strata serve: requests still in flight after --shutdown-timeout:", err)
			srv.Close()
			status = exitFailure
		}
	}
	if s := closeDB(); s != 0 {
		return s
	}
	if status == 0 {
		fmt.Fprintln(stderr, "strata serve: database closed")
	}
	return status
}
