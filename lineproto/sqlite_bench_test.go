package lineproto_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/stratadb/strata/internal/point"
	"github.com/stratadb/strata/lineproto"
)

// sqliteDB stores points in SQLite, one row per field, for comparison: one
// transaction and one prepared statement per batch, into
// samples(series TEXT, ts INTEGER, value REAL, PRIMARY KEY(series, ts))
// WITHOUT ROWID, where series is the canonical series key.
type sqliteDB struct {
	db   *sql.DB
	key  []byte
	tags []point.Tag
}

func openSQLite(tb testing.TB, dir string) *sqliteDB {
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "bench.db")+"?_journal_mode=WAL&_synchronous=NORMAL")
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE samples (series TEXT, ts INTEGER, value REAL,
		PRIMARY KEY (series, ts)) WITHOUT ROWID`); err != nil {
		tb.Fatal(err)
	}
	return &sqliteDB{db: db}
}

func (s *sqliteDB) Write(points []point.Point) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.Prepare("INSERT OR REPLACE INTO samples (series, ts, value) VALUES (?, ?, ?)")
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, p := range points {
		s.tags = append(s.tags[:0], p.Tags...)
		point.SortTags(s.tags)
		for _, f := range p.Fields {
			var v float64
			switch f.Value.Kind() {
			case point.KindFloat:
				v = f.Value.Float()
			case point.KindInt:
				v = float64(f.Value.Int())
			case point.KindUint:
				v = float64(f.Value.Uint())
			default:
				return fmt.Errorf("sqlite bench: %v field %q", f.Value.Kind(), f.Key)
			}
			s.key = point.AppendSeriesKey(s.key[:0], p.Measurement, s.tags, f.Key)
			if _, err := stmt.Exec(string(s.key), p.Time, v); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// BenchmarkWriteSQLite writes the same 1M lines, parsed the same way, into
// SQLite (WAL journal, synchronous=NORMAL) to compare with BenchmarkWrite.
func BenchmarkWriteSQLite(b *testing.B) {
	var dbs []*sqliteDB
	b.Cleanup(func() {
		for _, s := range dbs {
			s.db.Close()
		}
	})
	benchIngest(b, func() lineproto.DB {
		s := openSQLite(b, b.TempDir())
		dbs = append(dbs, s)
		return s
	})
}

// TestSQLiteDB checks the comparison DB of BenchmarkWriteSQLite.
func TestSQLiteDB(t *testing.T) {
	s := openSQLite(t, t.TempDir())
	defer s.db.Close()
	res := ingest(t, s, "m,b=2,a=1 v=1.5 10\nm,a=1,b=2 v=2.5 10\nm w=3i 20\n", lineproto.Options{})
	if res.Points != 3 || len(res.Rejected) != 0 {
		t.Fatalf("result: %+v", res)
	}
	rows, err := s.db.Query("SELECT series, ts, value FROM samples ORDER BY series, ts")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var series string
		var ts int64
		var v float64
		if err := rows.Scan(&series, &ts, &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s@%d=%v", series, ts, v))
	}
	want := []string{"m w@20=3", "m,a=1,b=2 v@10=2.5"}
	if !slices.Equal(got, want) {
		t.Errorf("rows %q, want %q", got, want)
	}
}
