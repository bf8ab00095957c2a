package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/server"
)

func init() {
	commands["backup"] = signalCommand("copy a database consistently, beside a running writer or server", backupMain)
	commands["restore"] = signalCommand("verify a backup, then copy it into a new database directory", restoreMain)
}

// serveInfoName is the file a running 'strata serve' keeps in its database
// directory, so that 'strata backup' finds it. The engine ignores files of
// other names than its own, and checkpoints do not copy it.
const serveInfoName = "serve.json"

// serveInfo is the content of serveInfoName.
type serveInfo struct {
	PID         int    `json:"pid"`
	Addr        string `json:"addr"`         // the address the server listens on
	DB          string `json:"db"`           // the database directory, absolute
	SnapshotDir string `json:"snapshot_dir"` // where POST /api/v1/admin/snapshot puts snapshots
	Token       bool   `json:"token"`        // whether requests need a token
}

// writeServeInfo publishes info in dir (write, fsync, rename) and returns
// a function that removes it.
func writeServeInfo(dir string, info serveInfo) (func(), error) {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, serveInfoName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	return func() { os.Remove(path) }, nil
}

// readServeInfo returns the serve.json of dir, or nil when there is none.
func readServeInfo(dir string) (*serveInfo, error) {
	b, err := os.ReadFile(filepath.Join(dir, serveInfoName))
	if errors.Is(err, iofs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var info serveInfo
	if err := json.Unmarshal(b, &info); err != nil || info.Addr == "" || info.SnapshotDir == "" {
		return nil, fmt.Errorf("%s is damaged: %v", filepath.Join(dir, serveInfoName), err)
	}
	return &info, nil
}

// dialAddr turns a listen address into one to connect to: an unspecified
// host (":8086", "0.0.0.0:8086", "[::]:8086") is this machine.
func dialAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

// errNoServer means that no server answered at the address of serve.json:
// it is stale (a server killed before removing it).
var errNoServer = errors.New("no server answers")

// askSnapshot asks the server of info for a snapshot and returns the
// snapshot's directory.
func askSnapshot(ctx context.Context, info *serveInfo, token string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := "http://" + dialAddr(info.Addr) + "/api/v1/admin/snapshot"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Token "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return "", fmt.Errorf("%w at %s", errNoServer, info.Addr)
		}
		return "", fmt.Errorf("ask the server at %s: %w", info.Addr, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Name string `json:"name"`
		} `json:"data"`
	}
	if resp.StatusCode == http.StatusUnauthorized {
		return "", fmt.Errorf("the server at %s needs its token: pass --token or --token-file", info.Addr)
	}
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != http.StatusOK || out.Status != "success" || out.Data.Name == "" {
		msg := strings.TrimSpace(string(body))
		if out.Error != "" {
			msg = out.Error
		}
		return "", fmt.Errorf("the server at %s answered %s: %s", info.Addr, resp.Status, msg)
	}
	if strings.ContainsAny(out.Data.Name, `/\`) || out.Data.Name == ".." {
		return "", fmt.Errorf("the server at %s answered a bad snapshot name %q", info.Addr, out.Data.Name)
	}
	dir := filepath.Join(info.SnapshotDir, out.Data.Name)
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
		return "", fmt.Errorf("the server at %s made snapshot %s, but it is not in %s: %w (is that server serving another database?)", info.Addr, out.Data.Name, info.SnapshotDir, err)
	}
	return dir, nil
}

// checkEmptyTarget fails unless dir is missing or an empty directory.
func checkEmptyTarget(dir, flag string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, iofs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", flag, dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s %s is not empty: give a new directory", flag, dir)
	}
	return nil
}

// renameDir is os.Rename; tests make it fail as across filesystems.
var renameDir = os.Rename

// moveSnapshot moves the snapshot directory src to dst (missing or
// empty): a rename on the same filesystem. Otherwise it checkpoints the
// snapshot into dst, the engine's own copy (marked incomplete until every
// file is copied and synced, so that a copy stopped part-way is never
// opened as a database), then removes src.
func moveSnapshot(ctx context.Context, src, dst string) error {
	if err := os.Remove(dst); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(dst)), 0o755); err != nil {
		return err
	}
	if err := renameDir(src, dst); err == nil {
		return nil
	}
	db, err := engine.Open(src, &engine.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	_, err = db.Checkpoint(ctx, dst)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.RemoveAll(src)
}

// dirSize counts the files under dir and their bytes.
func dirSize(dir string) (files int, bytes int64) {
	filepath.WalkDir(dir, func(_ string, d iofs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				files++
				bytes += info.Size()
			}
		}
		return nil
	})
	return files, bytes
}

const backupUsage = `usage: strata backup --db DIR --out DIR2 [flags]

Copy the database in DIR to DIR2 (missing or empty), consistent as of one moment: every
write acknowledged before the command started is in it, never half a batch or half a
delete. The database may be in use meanwhile:

  - When a 'strata serve' owns DIR, the backup asks it: serve keeps its address in
    DIR/serve.json, and backup sends POST /api/v1/admin/snapshot (with --token when the
    server needs one). The server writes the snapshot beside the database
    (DIR.snapshots/<name>), and backup moves it to DIR2 (on another filesystem, it
    checkpoints the snapshot into DIR2, marked incomplete until done, then removes it).
  - Otherwise (no serve.json, or no server answers at its address), backup opens DIR
    read-only, as the other read commands do, and copies it; a writer in another process
    may go on meanwhile.

Segments are hard-linked when DIR2 is on the same filesystem (a backup then costs little
disk beyond the WAL it copies) and copied otherwise. DIR2 is a database: 'strata verify
--db DIR2' checks it, 'strata query --db DIR2' reads it, 'strata restore' copies it back.
A backup that stops part-way is marked incomplete and no command opens it.
Exit status: 0 done, 1 failure, 2 bad usage.

examples:
  strata backup --db /var/lib/strata/data --out /backup/strata-$(date +%F)
  strata backup --db ./data --out ./data-copy --token-file /etc/strata/token`

// backupMain is the backup command.
func backupMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("backup", backupUsage, stderr)
	dir := fs.String("db", "", "database directory (required)")
	out := fs.String("out", "", "directory of the backup, missing or empty (required)")
	token := fs.String("token", "", "token of the running server, when it needs one")
	tokenFile := fs.String("token-file", "", "read the server's token from this file")
	timeout := fs.Duration("timeout", 10*time.Minute, "longest the server may take to answer")
	if st, done := parseFlags(fs, args); done {
		return st
	}
	usageErr := usageFail(fs, stderr)
	switch {
	case *dir == "":
		return usageErr("--db is required")
	case *out == "":
		return usageErr("--out is required")
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q", fs.Arg(0))
	case *token != "" && *tokenFile != "":
		return usageErr("--token and --token-file are exclusive")
	case *timeout <= 0:
		return usageErr("--timeout must be positive, not %v", *timeout)
	}
	fail := failWith(stderr, "backup", exitFailure)
	if *tokenFile != "" {
		var err error
		if *token, err = readTokenFile(*tokenFile); err != nil {
			return fail(err)
		}
	}
	if err := checkEmptyTarget(*out, "--out"); err != nil {
		return fail(err)
	}
	start := time.Now()
	info, err := readServeInfo(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "strata backup: %v; taking a read-only copy\n", err)
	}
	if info != nil {
		snap, err := askSnapshot(ctx, info, *token, *timeout)
		switch {
		case err == nil:
			if err := moveSnapshot(ctx, snap, *out); err != nil {
				return fail(fmt.Errorf("move snapshot %s to %s: %w", snap, *out, err))
			}
			files, bytes := dirSize(*out)
			fmt.Fprintf(stdout, "backup of %s in %s: %d files, %d bytes, through the server at %s, in %v\n",
				*dir, *out, files, bytes, info.Addr, time.Since(start).Round(time.Millisecond))
			return 0
		case errors.Is(err, errNoServer):
			fmt.Fprintf(stderr, "strata backup: %v (%s is stale); taking a read-only copy\n", err, serveInfoName)
		default:
			return fail(err)
		}
	}
	db, err := openExisting(*dir)
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	ci, err := db.Checkpoint(ctx, *out)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "backup of %s in %s: seq %d, %d files, %d bytes, read-only copy, in %v\n",
		*dir, *out, ci.Seq, ci.Files, ci.Bytes, time.Since(start).Round(time.Millisecond))
	return 0
}

const restoreUsage = `usage: strata restore --from DIR2 --db DIR

Restore the backup in DIR2 (made by 'strata backup') into DIR, which must be missing or
empty: restore never overwrites a database. It first verifies the whole backup, as
'strata verify' does (the manifest, the series catalog, every WAL record and every block
of every segment, each against its checksum), and copies nothing when any of it is
damaged, naming the damaged file. Then it copies the backup (hard links on the same
filesystem), the manifest last: a restore that stops part-way is marked incomplete and no
command opens it. Stop the server before restoring into its directory's place, then
start it on DIR.
Exit status: 0 done, 1 damaged backup or failure, 2 bad usage.

example:
  strata restore --from /backup/strata-2024-05-01 --db /var/lib/strata/data`

// restoreMain is the restore command.
func restoreMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("restore", restoreUsage, stderr)
	from := fs.String("from", "", "backup directory (required)")
	dir := fs.String("db", "", "database directory to create, missing or empty (required)")
	if st, done := parseFlags(fs, args); done {
		return st
	}
	usageErr := usageFail(fs, stderr)
	switch {
	case *from == "":
		return usageErr("--from is required")
	case *dir == "":
		return usageErr("--db is required")
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	fail := failWith(stderr, "restore", exitFailure)
	if err := checkEmptyTarget(*dir, "--db"); err != nil {
		return fail(err)
	}
	start := time.Now()
	db, err := engine.Open(*from, &engine.Options{ReadOnly: true})
	if err != nil {
		return fail(fmt.Errorf("backup %s: %w", *from, err))
	}
	defer db.Close()
	rep, err := db.Verify(ctx)
	if err != nil {
		return fail(fmt.Errorf("backup %s is damaged, nothing was restored: %w", *from, err))
	}
	ci, err := db.Checkpoint(ctx, *dir)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "verified %s: segments %d, blocks %d, samples %d, wal samples %d\n",
		*from, rep.Segments, rep.Blocks, rep.Samples, rep.MemTableSamples)
	fmt.Fprintf(stdout, "restored %s into %s: seq %d, %d files, %d bytes, in %v\n",
		*from, *dir, ci.Seq, ci.Files, ci.Bytes, time.Since(start).Round(time.Millisecond))
	return 0
}

// snapshotDirOf is where the server of the database in dir puts snapshots.
func snapshotDirOf(dir string) string { return server.SnapshotDir(dir) }
