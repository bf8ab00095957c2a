package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
)

// duckDBScript reads a Parquet file with DuckDB (npm @duckdb/node-api) and
// prints its column names and types and its rows, every value cast to
// text so that nothing is rounded on the way to JSON.
const duckDBScript = `
const { DuckDBInstance } = require('@duckdb/node-api');
(async () => {
  const file = process.argv[2].replaceAll("'", "''");
  const inst = await DuckDBInstance.create(':memory:');
  const conn = await inst.connect();
  const desc = await conn.runAndReadAll("DESCRIBE SELECT * FROM read_parquet('" + file + "')");
  const columns = desc.getRowObjectsJson().map(r => [r.column_name, r.column_type]);
  const sel = columns.map(([n]) => n === 'time'
    ? "CAST(epoch_ns(\"time\") AS VARCHAR) AS \"time\""
    : "CAST(\"" + n + "\" AS VARCHAR) AS \"" + n + "\"").join(', ');
  const rows = await conn.runAndReadAll("SELECT " + sel + " FROM read_parquet('" + file + "')");
  console.log(JSON.stringify({ columns, rows: rows.getRowObjectsJson() }));
})().catch(e => { console.error(e); process.exit(1); });
`

// duckDBNodeModules finds the node_modules directory that holds
// @duckdb/node-api: $STRATA_DUCKDB_NODE_MODULES, else the repository's
// .cache/duckdb/node_modules, else ~/.cache/strata/duckdb/node_modules.
func duckDBNodeModules(t *testing.T) string {
	var candidates []string
	if d := os.Getenv("STRATA_DUCKDB_NODE_MODULES"); d != "" {
		candidates = append(candidates, d)
	}
	if wd, err := os.Getwd(); err == nil {
		candidates = append(candidates, filepath.Join(wd, "..", "..", ".cache", "duckdb", "node_modules"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		candidates = append(candidates, filepath.Join(home, ".cache", "strata", "duckdb", "node_modules"))
	}
	for _, c := range candidates {
		if _, err := os.Stat(filepath.Join(c, "@duckdb", "node-api", "package.json")); err == nil {
			return c
		}
	}
	t.Fatalf("node is installed but @duckdb/node-api is not found in %q: install it with\n"+
		"  npm install --prefix .cache/duckdb @duckdb/node-api\n"+
		"(from the repository root) or point STRATA_DUCKDB_NODE_MODULES at a node_modules holding it", candidates)
	return ""
}

// TestParquetDuckDB exports a database of every kind as Parquet and reads
// it with DuckDB: the columns have the right names and types, and every
// value reads back exactly.
func TestParquetDuckDB(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed: bash scripts/test installs it (apt-get install -y nodejs npm)")
	}
	modules := duckDBNodeModules(t)

	dir := filepath.Join(t.TempDir(), "db")
	db, err := engine.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	const t0 = 1_700_000_000_000_000_001 // nanoseconds survive
	host := []engine.Tag{{Key: "host", Value: "a,b ✓"}}
	both := []engine.Tag{{Key: "host", Value: "h"}, {Key: "time", Value: "collides"}}
	pts := []engine.Point{
		{Measurement: "m", Tags: host, Fields: []engine.Field{{Key: "f", Value: engine.Float(-0.1)}}, Time: t0},
		{Measurement: "m", Tags: host, Fields: []engine.Field{{Key: "f", Value: engine.Float(math.MaxFloat64)}}, Time: t0 + 1},
		{Measurement: "m", Tags: both, Fields: []engine.Field{{Key: "i", Value: engine.Int(math.MinInt64)}}, Time: t0},
		{Measurement: "m", Tags: both, Fields: []engine.Field{{Key: "i", Value: engine.Int(math.MaxInt64)}}, Time: t0 + 2},
		{Measurement: "m", Fields: []engine.Field{{Key: "u", Value: engine.Uint(math.MaxUint64)}}, Time: -5},
		{Measurement: "n", Fields: []engine.Field{{Key: "b", Value: engine.Bool(true)}}, Time: 0},
		{Measurement: "n", Fields: []engine.Field{{Key: "s", Value: engine.String("quote \" new\nline ✓")}}, Time: 7},
	}
	if err := db.Write(pts); err != nil {
		t.Fatal(err)
	}
	db.Close()
	file := filepath.Join(t.TempDir(), "out.parquet")
	runWant(t, exportMain, 0, "--db", dir, "--format", "parquet", "--out", file)

	script := filepath.Join(t.TempDir(), "read.js")
	if err := os.WriteFile(script, []byte(duckDBScript), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, script, file)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("duckdb: %v\n%s", err, stderr)
	}
	var res struct {
		Columns [][2]string         `json:"columns"`
		Rows    []map[string]string `json:"rows"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	types := map[string]string{}
	for _, c := range res.Columns {
		types[c[0]] = c[1]
	}
	wantTypes := map[string]string{
		"measurement": "VARCHAR", "field": "VARCHAR", "time": "TIMESTAMP_NS",
		"host": "VARCHAR", "tag_time": "VARCHAR",
		"value_float": "DOUBLE", "value_int": "BIGINT", "value_uint": "UBIGINT",
		"value_bool": "BOOLEAN", "value_string": "VARCHAR",
	}
	if fmt.Sprint(types) != fmt.Sprint(wantTypes) {
		t.Errorf("columns %v\nwant %v", types, wantTypes)
	}
	var got []string
	for _, r := range res.Rows {
		var vals []string
		for _, c := range []string{"value_float", "value_int", "value_uint", "value_bool", "value_string"} {
			if v, ok := r[c]; ok && v != "" || c == "value_string" && r["value_string"] != "" {
				if c == "value_float" {
					f, err := strconv.ParseFloat(v, 64)
					if err != nil {
						t.Fatalf("value_float %q: %v", v, err)
					}
					v = strconv.FormatFloat(f, 'g', -1, 64)
				}
				vals = append(vals, c+"="+v)
			}
		}
		got = append(got, fmt.Sprintf("%s host=%s tag_time=%s %s %s %s", r["measurement"], r["host"], r["tag_time"], r["field"], r["time"], strings.Join(vals, ",")))
	}
	slices.Sort(got)
	want := []string{
		"m host= tag_time= u -5 value_uint=18446744073709551615",
		"m host=a,b ✓ tag_time= f 1700000000000000001 value_float=-0.1",
		"m host=a,b ✓ tag_time= f 1700000000000000002 value_float=1.7976931348623157e+308",
		"m host=h tag_time=collides i 1700000000000000001 value_int=-9223372036854775808",
		"m host=h tag_time=collides i 1700000000000000003 value_int=9223372036854775807",
		"n host= tag_time= b 0 value_bool=true",
		"n host= tag_time= s 7 value_string=quote \" new\nline ✓",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
