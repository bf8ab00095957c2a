package bench

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver

	"github.com/stratadb/strata/engine"
)

// The SQLite schema: series in their own table, samples keyed by
// (series, ts) in a clustered WITHOUT ROWID table, so a series' samples are
// stored in time order like in the other engines.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS series (
	id          INTEGER PRIMARY KEY,
	key         TEXT NOT NULL UNIQUE,
	measurement TEXT NOT NULL,
	field       TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS points (
	series INTEGER NOT NULL,
	ts     INTEGER NOT NULL,
	value  REAL NOT NULL,
	PRIMARY KEY (series, ts)
) WITHOUT ROWID;`

type sqliteStore struct {
	db *sql.DB
	// mu guards keys against the queries; the writer, its only writer,
	// reads ids and keys unlocked.
	mu   sync.RWMutex
	ids  map[string]int64 // series key -> id
	keys map[int64]string // id -> series key
	kb   keyBuilder
}

func openSQLite(dir string, cfg Config, dur Durability) (store, error) {
	sync := "NORMAL"
	if dur == Durable {
		sync = "FULL"
	}
	dsn := "file:" + filepath.Join(dir, "bench.db") + "?_journal_mode=WAL&_synchronous=" + sync
	if cfg == ConfigEqualMemory {
		dsn += fmt.Sprintf("&_cache_size=-%d", equalMemory>>10) // negative: KiB
	}
	if err := mkdir(dir); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, err
	}
	// The driver applies the pragmas above to every connection it opens.
	// The writes are serial and use one connection at a time; queries
	// running beside them (the mixed workload) get connections of their
	// own, so they read a WAL snapshot instead of waiting for the writer.
	db.SetMaxIdleConns(4)
	s := &sqliteStore{db: db, ids: map[string]int64{}, keys: map[int64]string{}}
	if err := s.init(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *sqliteStore) init() error {
	if _, err := s.db.Exec(sqliteSchema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	rows, err := s.db.Query(`SELECT id, key FROM series`)
	if err != nil {
		return fmt.Errorf("load series: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var key string
		if err := rows.Scan(&id, &key); err != nil {
			return fmt.Errorf("load series: %w", err)
		}
		s.ids[key], s.keys[id] = id, key
	}
	return rows.Err()
}

// write stores a batch in one transaction with one prepared statement.
func (s *sqliteStore) write(points []engine.Point) (err error) {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	var added []string // series created by this batch, forgotten on rollback
	defer func() {
		if err != nil {
			tx.Rollback()
			s.mu.Lock()
			for _, k := range added {
				delete(s.keys, s.ids[k])
				delete(s.ids, k)
			}
			s.mu.Unlock()
		}
	}()
	stmt, err := tx.Prepare(`INSERT OR REPLACE INTO points (series, ts, value) VALUES (?, ?, ?)`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	var addSeries *sql.Stmt
	for i := range points {
		p := &points[i]
		for f := range p.Fields {
			v, err := floatValue(p, f)
			if err != nil {
				return err
			}
			key := s.kb.key(p, f)
			id, ok := s.ids[string(key)]
			if !ok {
				if addSeries == nil {
					addSeries, err = tx.Prepare(`INSERT INTO series (key, measurement, field) VALUES (?, ?, ?)`)
					if err != nil {
						return err
					}
					defer addSeries.Close()
				}
				k := string(key)
				res, err := addSeries.Exec(k, p.Measurement, p.Fields[f].Key)
				if err != nil {
					return fmt.Errorf("add series: %w", err)
				}
				if id, err = res.LastInsertId(); err != nil {
					return err
				}
				s.mu.Lock()
				s.ids[k], s.keys[id] = id, k
				s.mu.Unlock()
				added = append(added, k)
			}
			if _, err := stmt.Exec(id, p.Time, v); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

// query answers q with one SQL statement: a join from the series table into
// the points' primary key, grouped in SQL for the mean.
func (s *sqliteStore) query(ctx context.Context, q engine.Query, rs *resultSet) error {
	var b strings.Builder
	var args []any
	switch q.Agg {
	case engine.AggNone:
		b.WriteString(`SELECT p.series, p.ts, p.value`)
	case engine.AggMean:
		if q.Every > 0 {
			// Epoch-aligned buckets, flooring for negative times.
			b.WriteString(`SELECT p.series, p.ts - ((p.ts % ?) + ?) % ? AS bucket, avg(p.value)`)
			args = append(args, q.Every, q.Every, q.Every)
		} else {
			b.WriteString(`SELECT p.series, ? AS bucket, avg(p.value)`)
			args = append(args, q.Start)
		}
	default:
		return errUnsupported
	}
	b.WriteString(` FROM series s JOIN points p ON p.series = s.id WHERE s.measurement = ?`)
	args = append(args, q.Measurement)
	if q.Field != "" {
		b.WriteString(` AND s.field = ?`)
		args = append(args, q.Field)
	}
	if len(q.Tags) > 0 {
		if q.Field == "" {
			return errUnsupported
		}
		b.WriteString(` AND s.key = ?`)
		args = append(args, engine.SeriesKey(q.Measurement, q.Tags, q.Field))
	}
	b.WriteString(` AND p.ts >= ? AND p.ts < ?`)
	args = append(args, q.Start, q.End)
	if q.Agg == engine.AggMean {
		b.WriteString(` GROUP BY p.series, bucket`)
	}
	rows, err := s.db.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	last, cur := int64(-1), int32(0)
	for rows.Next() {
		var id, t int64
		var v float64
		if err := rows.Scan(&id, &t, &v); err != nil {
			return err
		}
		if id != last {
			s.mu.RLock()
			key, ok := s.keys[id]
			s.mu.RUnlock()
			if !ok {
				return fmt.Errorf("series id %d not in the series table", id)
			}
			cur, last = rs.series(key), id
		}
		rs.add(cur, t, v)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

func (s *sqliteStore) close() error { return s.db.Close() }
