package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"golang.org/x/term"

	"github.com/stratadb/strata/engine"
)

func init() {
	commands["export"] = signalCommand("stream selected samples out as line protocol, CSV or Parquet", exportMain)
}

// The columns of the CSV and Parquet formats. Tag columns are named by
// their key, except that a key equal to a reserved name or starting with
// tagColumnPrefix gets the prefix, which import strips again: the mapping
// is one to one.
const (
	colMeasurement  = "measurement"
	colField        = "field"
	colTime         = "time"
	colKind         = "kind"  // CSV
	colValue        = "value" // CSV
	tagColumnPrefix = "tag_"
)

// parquetValueColumns are Parquet's typed value columns, one per kind.
var parquetValueColumns = map[engine.Kind]string{
	engine.KindFloat:  "value_float",
	engine.KindInt:    "value_int",
	engine.KindUint:   "value_uint",
	engine.KindBool:   "value_bool",
	engine.KindString: "value_string",
}

func reservedColumn(name string) bool {
	switch name {
	case colMeasurement, colField, colTime, colKind, colValue:
		return true
	}
	for _, c := range parquetValueColumns {
		if c == name {
			return true
		}
	}
	return false
}

// tagColumn names the column of tag key k.
func tagColumn(k string) string {
	if reservedColumn(k) || strings.HasPrefix(k, tagColumnPrefix) {
		return tagColumnPrefix + k
	}
	return k
}

// tagKeyOfColumn is the inverse of tagColumn.
func tagKeyOfColumn(c string) string {
	if k, ok := strings.CutPrefix(c, tagColumnPrefix); ok {
		return k
	}
	return c
}

// kindNames are the kinds as the CSV's kind column names them.
var kindNames = map[engine.Kind]string{
	engine.KindFloat:  "float",
	engine.KindInt:    "int",
	engine.KindUint:   "uint",
	engine.KindBool:   "bool",
	engine.KindString: "string",
}

// formatValue writes v exactly: floats in the shortest form that parses
// back to the same bits (-0 included).
func formatValue(v engine.Value) string {
	switch v.Kind() {
	case engine.KindFloat:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case engine.KindInt:
		return strconv.FormatInt(v.Int(), 10)
	case engine.KindUint:
		return strconv.FormatUint(v.Uint(), 10)
	case engine.KindBool:
		return strconv.FormatBool(v.Bool())
	default:
		return v.Str()
	}
}

// sampleWriter writes the samples of series in one format.
type sampleWriter interface {
	write(s engine.Series) error
	close() error
}

// lpWriter writes line protocol, one line per sample, with nanosecond
// timestamps, through the line-protocol library's encoder (which escapes
// names and strings).
type lpWriter struct {
	w   *bufio.Writer
	enc lineprotocol.Encoder
}

func newLPWriter(w io.Writer) *lpWriter {
	lw := &lpWriter{w: bufio.NewWriterSize(w, 256<<10)}
	lw.enc.SetPrecision(lineprotocol.Nanosecond)
	return lw
}

func lpValue(v engine.Value) (lineprotocol.Value, bool) {
	switch v.Kind() {
	case engine.KindFloat:
		return lineprotocol.FloatValue(v.Float())
	case engine.KindInt:
		return lineprotocol.IntValue(v.Int()), true
	case engine.KindUint:
		return lineprotocol.UintValue(v.Uint()), true
	case engine.KindBool:
		return lineprotocol.BoolValue(v.Bool()), true
	default:
		return lineprotocol.StringValue(v.Str())
	}
}

func (lw *lpWriter) write(s engine.Series) error {
	for _, smp := range s.Samples {
		lw.enc.StartLine(s.Measurement)
		for _, t := range s.Tags {
			lw.enc.AddTag(t.Key, t.Value)
		}
		v, ok := lpValue(smp.Value)
		if !ok {
			return fmt.Errorf("series %s %s: value %v has no line protocol form", s.Measurement, s.Field, smp.Value)
		}
		lw.enc.AddField(s.Field, v)
		lw.enc.EndLine(time.Unix(0, smp.Time))
		if err := lw.enc.Err(); err != nil {
			return fmt.Errorf("series %s %s: %w", s.Measurement, s.Field, err)
		}
		if b := lw.enc.Bytes(); len(b) >= 64<<10 {
			if _, err := lw.w.Write(b); err != nil {
				return err
			}
			lw.enc.Reset()
		}
	}
	return nil
}

func (lw *lpWriter) close() error {
	if _, err := lw.w.Write(lw.enc.Bytes()); err != nil {
		return err
	}
	lw.enc.Reset()
	return lw.w.Flush()
}

// csvWriter writes a header, then one row per sample: measurement, one
// column per tag key (empty when the series lacks it), field, time (Unix
// ns), kind and value.
type csvWriter struct {
	w      *csv.Writer
	tagCol map[string]int
	row    []string
}

func newCSVWriter(w io.Writer, tagKeys []string) (*csvWriter, error) {
	cw := &csvWriter{w: csv.NewWriter(w), tagCol: make(map[string]int, len(tagKeys))}
	header := []string{colMeasurement}
	for _, k := range tagKeys {
		cw.tagCol[k] = len(header)
		header = append(header, tagColumn(k))
	}
	header = append(header, colField, colTime, colKind, colValue)
	cw.row = make([]string, len(header))
	return cw, cw.w.Write(header)
}

func (cw *csvWriter) write(s engine.Series) error {
	clear(cw.row)
	n := len(cw.row)
	cw.row[0] = s.Measurement
	for _, t := range s.Tags {
		i, ok := cw.tagCol[t.Key]
		if !ok {
			return fmt.Errorf("series %s: tag key %q appeared during the export", s.Measurement, t.Key)
		}
		cw.row[i] = t.Value
	}
	cw.row[n-4] = s.Field
	if len(s.Samples) > 0 {
		cw.row[n-2] = kindNames[s.Samples[0].Value.Kind()]
	}
	for _, smp := range s.Samples {
		cw.row[n-3] = strconv.FormatInt(smp.Time, 10)
		cw.row[n-1] = formatValue(smp.Value)
		if smp.Value.Kind() == engine.KindString && strings.Contains(cw.row[n-1], "\r\n") {
			// CSV readers (import's too) turn a quoted "\r\n" into "\n".
			return fmt.Errorf("series %s: the string at time %d holds \"\\r\\n\", which CSV cannot carry: use lp or parquet for it",
				engine.SeriesKey(s.Measurement, s.Tags, s.Field), smp.Time)
		}
		if err := cw.w.Write(cw.row); err != nil {
			return err
		}
	}
	return nil
}

func (cw *csvWriter) close() error {
	cw.w.Flush()
	return cw.w.Error()
}

// parquetRowGroupRows bounds a row group, so that the writer's buffers,
// not the data, set the memory an export takes.
const parquetRowGroupRows = 256 << 10

// parquetSchema is the Parquet schema of an export whose series have
// tagKeys: measurement, one optional string column per tag key, field,
// time as TIMESTAMP(NANOS) (not adjusted to UTC, so that readers keep the
// nanoseconds: DuckDB reads it as TIMESTAMP_NS) and one optional typed
// column per kind.
func parquetSchema(tagKeys []string) *parquet.Schema {
	g := parquet.Group{
		colMeasurement:                         parquet.String(),
		colField:                               parquet.String(),
		colTime:                                parquet.TimestampAdjusted(parquet.Nanosecond, false),
		parquetValueColumns[engine.KindFloat]:  parquet.Optional(parquet.Leaf(parquet.DoubleType)),
		parquetValueColumns[engine.KindInt]:    parquet.Optional(parquet.Int(64)),
		parquetValueColumns[engine.KindUint]:   parquet.Optional(parquet.Uint(64)),
		parquetValueColumns[engine.KindBool]:   parquet.Optional(parquet.Leaf(parquet.BooleanType)),
		parquetValueColumns[engine.KindString]: parquet.Optional(parquet.String()),
	}
	for _, k := range tagKeys {
		g[tagColumn(k)] = parquet.Optional(parquet.String())
	}
	return parquet.NewSchema("strata", g)
}

// columnIndexes maps the top-level field names of schema to their column
// indexes (the schema is flat: one leaf each).
func columnIndexes(schema *parquet.Schema) map[string]int {
	idx := make(map[string]int)
	for i, f := range schema.Fields() {
		idx[f.Name()] = i
	}
	return idx
}

// parquetWriter writes one row per sample.
type parquetWriter struct {
	w      *parquet.Writer
	cols   int
	idx    map[string]int
	tagIdx map[string]int
	rows   []parquet.Row
	inGrp  int
}

func newParquetWriter(w io.Writer, tagKeys []string) *parquetWriter {
	schema := parquetSchema(tagKeys)
	pw := &parquetWriter{
		w:      parquet.NewWriter(w, schema, parquet.Compression(&zstd.Codec{}), parquet.CreatedBy("strata", "export", "")),
		cols:   len(schema.Fields()),
		idx:    columnIndexes(schema),
		tagIdx: make(map[string]int, len(tagKeys)),
	}
	for _, k := range tagKeys {
		pw.tagIdx[k] = pw.idx[tagColumn(k)]
	}
	return pw
}

func (pw *parquetWriter) write(s engine.Series) error {
	// The columns every row of the series shares.
	base := make([]parquet.Value, pw.cols)
	for i := range base {
		base[i] = parquet.NullValue().Level(0, 0, i)
	}
	base[pw.idx[colMeasurement]] = parquet.ByteArrayValue([]byte(s.Measurement)).Level(0, 0, pw.idx[colMeasurement])
	base[pw.idx[colField]] = parquet.ByteArrayValue([]byte(s.Field)).Level(0, 0, pw.idx[colField])
	for _, t := range s.Tags {
		i, ok := pw.tagIdx[t.Key]
		if !ok {
			return fmt.Errorf("series %s: tag key %q appeared during the export", s.Measurement, t.Key)
		}
		base[i] = parquet.ByteArrayValue([]byte(t.Value)).Level(0, 1, i)
	}
	ti := pw.idx[colTime]
	for _, smp := range s.Samples {
		// Rows are reused once written: the writer copies their values.
		var row parquet.Row
		if n := len(pw.rows); n < cap(pw.rows) && len(pw.rows[:n+1][n]) == pw.cols {
			row = pw.rows[:n+1][n]
		} else {
			row = make(parquet.Row, pw.cols)
		}
		copy(row, base)
		row[ti] = parquet.Int64Value(smp.Time).Level(0, 0, ti)
		vi := pw.idx[parquetValueColumns[smp.Value.Kind()]]
		var v parquet.Value
		switch smp.Value.Kind() {
		case engine.KindFloat:
			v = parquet.DoubleValue(smp.Value.Float())
		case engine.KindInt:
			v = parquet.Int64Value(smp.Value.Int())
		case engine.KindUint:
			v = parquet.Int64Value(int64(smp.Value.Uint()))
		case engine.KindBool:
			v = parquet.BooleanValue(smp.Value.Bool())
		default:
			v = parquet.ByteArrayValue([]byte(smp.Value.Str()))
		}
		row[vi] = v.Level(0, 1, vi)
		if n := len(pw.rows); n < cap(pw.rows) {
			pw.rows = pw.rows[:n+1]
			pw.rows[n] = row
		} else {
			pw.rows = append(pw.rows, row)
		}
		if len(pw.rows) >= 4096 {
			if err := pw.flushRows(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (pw *parquetWriter) flushRows() error {
	if _, err := pw.w.WriteRows(pw.rows); err != nil {
		return err
	}
	pw.inGrp += len(pw.rows)
	pw.rows = pw.rows[:0]
	if pw.inGrp >= parquetRowGroupRows {
		pw.inGrp = 0
		return pw.w.Flush()
	}
	return nil
}

func (pw *parquetWriter) close() error {
	if len(pw.rows) > 0 {
		if _, err := pw.w.WriteRows(pw.rows); err != nil {
			return err
		}
	}
	return pw.w.Close()
}

const exportUsage = `usage: strata export --db DIR [selector flags] [--start T] [--end T] --format lp|csv|parquet [--out FILE]

Stream every selected sample out of the database, series by series (sorted by series key,
then time); memory does not grow with the data. The database is opened read-only, so a
running writer may keep it open. Without --measurement, every measurement is exported.
Formats:
  lp       InfluxDB line protocol, one line per sample, ns timestamps: ints with i, uints
           with u, strings quoted and escaped. 'strata ingest' or 'strata import' loads it
           back into an identical database.
  csv      a header, then one row per sample: measurement, one column per tag key (empty
           when a series lacks it), field, time (Unix ns), kind (float, int, uint, bool,
           string), value. A string holding "\r\n" cannot be read back from CSV: export
           refuses its series.
  parquet  one row per sample: measurement, one column per tag key, field, time as a
           nanosecond TIMESTAMP, and one typed nullable column per kind (value_float,
           value_int, value_uint, value_bool, value_string). Zstd compressed.
A tag key equal to a column name (measurement, field, time, kind, value, value_*) or
starting with "tag_" gets the column name "tag_<key>"; import maps it back.
Exit status: 0 done, 1 failure, 2 bad usage.

examples:
  strata export --db ./data --format lp --out data.lp
  strata export --db ./data --measurement sensor --match 'site=site-01' --start -7d --format parquet --out week.parquet
  duckdb -c "select * from 'week.parquet' limit 5"`

// exportMain is the export command.
func exportMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("export", exportUsage, stderr)
	sf := addSelectorFlags(fs, "measurement; empty = every measurement")
	format := fs.String("format", "", "lp, csv or parquet (required)")
	out := fs.String("out", "", "output file (default: stdout)")
	if st, done := parseFlags(fs, args); done {
		return st
	}
	usageErr := usageFail(fs, stderr)
	*format = strings.ToLower(*format) // as query's --format
	switch {
	case *sf.db == "":
		return usageErr("--db is required")
	case *format != "lp" && *format != "csv" && *format != "parquet":
		return usageErr("--format must be lp, csv or parquet, not %q", *format)
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	sel, err := sf.selector(time.Now())
	if err != nil {
		return usageErr("%v", err)
	}
	fail := failWith(stderr, "export", exitFailure)
	db, err := openExisting(*sf.db)
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	var w io.Writer = stdout
	var file *os.File
	if *out != "" && *out != "-" {
		if file, err = os.Create(*out); err != nil {
			return fail(err)
		}
		defer file.Close()
		w = file
	} else if *format == "parquet" {
		if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return fail(errors.New("will not write Parquet to a terminal: give --out FILE"))
		}
	}
	n, err := export(ctx, db, sel, *format, w)
	if err == nil && file != nil {
		if err = file.Sync(); err == nil {
			err = file.Close()
		}
	}
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stderr, "strata export: %d samples\n", n)
	return 0
}

// export writes the samples sel selects (every measurement when its
// Measurement is empty) to w in format, and returns how many it wrote.
func export(ctx context.Context, db *engine.DB, sel engine.Selector, format string, w io.Writer) (int64, error) {
	measurements := []string{sel.Measurement}
	if sel.Measurement == "" {
		var err error
		if measurements, err = db.Measurements(ctx); err != nil {
			return 0, err
		}
	}
	var sw sampleWriter
	switch format {
	case "lp":
		sw = newLPWriter(w)
	default:
		keys, err := db.TagKeys(ctx, sel)
		if err != nil {
			return 0, err
		}
		if format == "csv" {
			if sw, err = newCSVWriter(w, keys); err != nil {
				return 0, err
			}
		} else {
			sw = newParquetWriter(w, keys)
		}
	}
	var n int64
	for _, m := range measurements {
		q := engine.Query{Selector: sel}
		q.Measurement = m
		for s, err := range db.QuerySeq(ctx, q) {
			if err != nil {
				return n, err
			}
			if err := sw.write(s); err != nil {
				return n, err
			}
			n += int64(len(s.Samples))
		}
	}
	return n, sw.close()
}
