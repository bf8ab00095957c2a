package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratadb/strata/engine"
)

// TestAdminSnapshot takes a snapshot through the admin endpoint: it needs
// the token, answers Prometheus' shape, and the snapshot beside the
// database opens with everything written before the request.
func TestAdminSnapshot(t *testing.T) {
	ts := newTestServer(t, &Options{Token: "tok"})
	if err := ts.db.Write([]engine.Point{{Measurement: "m", Fields: []engine.Field{{Key: "v", Value: engine.Int(1)}}, Time: 1}}); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := ts.do(http.MethodPost, "/api/v1/admin/snapshot", nil); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d", code)
	}
	if code, _, _ := ts.do(http.MethodGet, "/api/v1/admin/snapshot", nil, "Authorization", "Token tok"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", code)
	}
	code, _, body := ts.do(http.MethodPost, "/api/v1/admin/snapshot", nil, "Authorization", "Token tok")
	var resp struct {
		Status string `json:"status"`
		Data   struct {
			Name string `json:"name"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || code != http.StatusOK || resp.Status != "success" || resp.Data.Name == "" {
		t.Fatalf("snapshot: %d %s (%v)", code, body, err)
	}
	dir := filepath.Join(SnapshotDir(ts.db.Dir()), resp.Data.Name)
	snap, err := engine.Open(dir, &engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	res, err := snap.Query(context.Background(), engine.Query{Selector: engine.Selector{Measurement: "m"}})
	if err != nil || len(res) != 1 || len(res[0].Samples) != 1 {
		t.Errorf("snapshot holds %v, %v", res, err)
	}
	// Nothing was put into the database directory.
	entries, _ := os.ReadDir(ts.db.Dir())
	for _, e := range entries {
		if e.IsDir() && e.Name() != "wal" {
			t.Errorf("database directory gained %s", e.Name())
		}
	}
}
