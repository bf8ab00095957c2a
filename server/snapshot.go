package server

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"path/filepath"
	"time"
)

// SnapshotDir is where POST /api/v1/admin/snapshot puts the snapshots of
// the database in dbDir: the directory beside it named "<base>.snapshots"
// (for /var/lib/strata/data, /var/lib/strata/data.snapshots). Nothing is
// put inside the database directory itself.
func SnapshotDir(dbDir string) string {
	clean := filepath.Clean(dbDir)
	return filepath.Join(filepath.Dir(clean), filepath.Base(clean)+".snapshots")
}

// snapshot answers POST /api/v1/admin/snapshot as Prometheus' admin API
// does: it takes a checkpoint of the database into
// SnapshotDir(db.Dir())/<name> and answers
// {"status":"success","data":{"name":"<name>"}}. The name is the UTC time
// and a random suffix, so concurrent snapshots never collide.
func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) {
	var rnd [4]byte
	rand.Read(rnd[:])
	name := time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(rnd[:])
	dir := filepath.Join(SnapshotDir(s.db.Dir()), name)
	if _, err := s.db.Checkpoint(r.Context(), dir); err != nil {
		s.opts.Logger.Error("snapshot", "dir", dir, "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]any{
			"status": "error", "errorType": "internal", "error": "create snapshot: " + err.Error(),
		})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "success", "data": map[string]string{"name": name}})
}
