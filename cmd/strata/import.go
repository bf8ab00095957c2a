package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/lineproto"
)

func init() {
	commands["import"] = signalCommand("load line protocol, CSV or Parquet files (as export writes them) into a database", importMain)
}

// importBatch is how many points an import writes at a time.
const importBatch = 10000

// importShowRejected is how many rejections per file the summary lists.
const importShowRejected = 10

// lpMaxLineBytes is the longest line-protocol line import and ingest read:
// the longest line export writes, a series key and a string value of the
// engine's largest sizes with every byte escaped, and a timestamp. The
// lineproto default (64 KiB) would reject the string values longer than
// that which export writes. A line is buffered only as long as it is.
const lpMaxLineBytes = 2*engine.MaxKeyLen + 2*engine.MaxStringLen + 64

const importUsage = `usage: strata import --db DIR FILE...

Load each FILE into the database in DIR (created if missing). The format is found from the
content: Parquet (the file starts with PAR1), CSV (the first line is the header that
'strata export --format csv' writes: measurement, tag columns, field, time, kind, value),
else InfluxDB line protocol with nanosecond timestamps. Rows and lines are written in
batches through the database's write path; an invalid one is rejected alone, reported with
its line number (CSV, line protocol) or row number (Parquet), and the others are written.
Exit status: 0 every line or row written, 1 some rejected, 2 failure or bad usage.

examples:
  strata import --db ./restored data.lp
  strata import --db ./restored week.parquet month.csv`

// importMain is the import command.
func importMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("import", importUsage, stderr)
	dir := fs.String("db", "", "database directory (required)")
	if st, done := parseFlags(fs, args); done {
		return st
	}
	if *dir == "" || fs.NArg() == 0 {
		return usageFail(fs, stderr)("--db and at least one FILE are required")
	}
	fail := failWith(stderr, "import", 2)
	// Every FILE must be there before the database is opened (and
	// perhaps created): a typo in a name leaves nothing behind.
	for _, name := range fs.Args() {
		if info, err := os.Stat(name); err != nil {
			return fail(err)
		} else if info.IsDir() {
			return fail(fmt.Errorf("%s is a directory", name))
		}
	}
	db, err := engine.Open(*dir, nil)
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	status := 0
	for _, name := range fs.Args() {
		start := time.Now()
		res, err := importFile(ctx, db, name)
		if res.format == "" { // not opened: nothing read
			return fail(fmt.Errorf("%s: %w", name, err))
		}
		unit := "lines"
		if res.format == "parquet" {
			unit = "rows"
		}
		fmt.Fprintf(stdout, "%s (%s): %d %s, %d points written, %d rejected in %v\n",
			name, res.format, res.read, unit, res.written, res.rejectedCount, time.Since(start).Round(time.Millisecond))
		for _, r := range res.rejected {
			fmt.Fprintf(stdout, "  %s: %s\n", name, r)
		}
		if n := res.rejectedCount - len(res.rejected); n > 0 {
			fmt.Fprintf(stdout, "  %s: ... and %d more\n", name, n)
		}
		if err != nil {
			return fail(fmt.Errorf("%s: %w", name, err))
		}
		if res.rejectedCount > 0 {
			status = 1
		}
	}
	if err := db.Close(); err != nil {
		return fail(err)
	}
	return status
}

// importResult is what importing one file did.
type importResult struct {
	format        string
	read          int // lines or rows read (CSV: without the header)
	written       int // points written
	rejectedCount int
	rejected      []string // the first importShowRejected, "line N: reason"
}

func (r *importResult) reject(where string, n int, err error) {
	r.rejectedCount++
	if len(r.rejected) < importShowRejected {
		r.rejected = append(r.rejected, fmt.Sprintf("%s %d: %v", where, n, err))
	}
}

// importFile loads one file, detecting its format from its first bytes.
func importFile(ctx context.Context, db *engine.DB, name string) (importResult, error) {
	var res importResult
	f, err := os.Open(name)
	if err != nil {
		return res, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	head, _ := br.Peek(4)
	if string(head) == "PAR1" {
		res.format = "parquet"
		info, err := f.Stat()
		if err != nil {
			return res, err
		}
		err = importParquet(ctx, db, f, info.Size(), &res)
		return res, err
	}
	first, _ := br.Peek(br.Size())
	if i := bytes.IndexByte(first, '\n'); i >= 0 {
		first = first[:i]
	}
	if isExportCSVHeader(string(bytes.TrimRight(first, "\r"))) {
		res.format = "csv"
		return res, importCSV(ctx, db, br, &res)
	}
	res.format = "lp"
	lres, err := lineproto.Write(ctx, db, br, lineproto.Options{MaxRejected: importShowRejected, MaxLineBytes: lpMaxLineBytes})
	res.read, res.written, res.rejectedCount = lres.Lines, lres.Points, lres.RejectedCount
	for _, le := range lres.Rejected {
		res.rejected = append(res.rejected, le.Error())
	}
	return res, err
}

// isExportCSVHeader reports whether line is the header export writes.
func isExportCSVHeader(line string) bool {
	r := csv.NewReader(strings.NewReader(line))
	cols, err := r.Read()
	if err != nil || len(cols) < 5 || cols[0] != colMeasurement {
		return false
	}
	n := len(cols)
	return cols[n-4] == colField && cols[n-3] == colTime && cols[n-2] == colKind && cols[n-1] == colValue
}

// pointBatch collects points with the line or row each came from, and
// writes them: a point the engine refuses is rejected alone.
type pointBatch struct {
	db    *engine.DB
	res   *importResult
	where string // "line" or "row"
	pts   []engine.Point
	nums  []int
}

func (b *pointBatch) add(p engine.Point, n int) error {
	b.pts = append(b.pts, p)
	b.nums = append(b.nums, n)
	if len(b.pts) >= importBatch {
		return b.flush()
	}
	return nil
}

// end writes the points b holds when reading stopped at err, so that,
// as on every path, what was read before a failure is written and
// counted; it returns err, or the failure of that write.
func (b *pointBatch) end(err error) error {
	if ferr := b.flush(); ferr != nil && err == nil {
		err = ferr
	}
	return err
}

func (b *pointBatch) flush() error {
	for len(b.pts) > 0 {
		err := b.db.Write(b.pts)
		if err == nil {
			b.res.written += len(b.pts)
			break
		}
		var pe *engine.PointError
		if !errors.As(err, &pe) || pe.Index < 0 || pe.Index >= len(b.pts) {
			return err
		}
		b.res.reject(b.where, b.nums[pe.Index], pe.Err)
		b.pts = slices.Delete(b.pts, pe.Index, pe.Index+1)
		b.nums = slices.Delete(b.nums, pe.Index, pe.Index+1)
	}
	b.pts, b.nums = b.pts[:0], b.nums[:0]
	return nil
}

// parseKindValue parses the value text of a CSV row of kind k.
func parseKindValue(kind, s string) (engine.Value, error) {
	switch kind {
	case "float":
		v, err := strconv.ParseFloat(s, 64)
		return engine.Float(v), err
	case "int":
		v, err := strconv.ParseInt(s, 10, 64)
		return engine.Int(v), err
	case "uint":
		v, err := strconv.ParseUint(s, 10, 64)
		return engine.Uint(v), err
	case "bool":
		v, err := strconv.ParseBool(s)
		return engine.Bool(v), err
	case "string":
		return engine.String(s), nil
	}
	return engine.Value{}, fmt.Errorf("unknown kind %q (want float, int, uint, bool or string)", kind)
}

// importCSV loads a CSV file as export writes it.
func importCSV(ctx context.Context, db *engine.DB, r io.Reader, res *importResult) error {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return fmt.Errorf("read header: %w", err)
	}
	n := len(header)
	tagKeys := make([]string, n-5)
	for i := range tagKeys {
		tagKeys[i] = tagKeyOfColumn(header[1+i])
	}
	cr.FieldsPerRecord = n
	b := &pointBatch{db: db, res: res, where: "line"}
	for {
		if res.read%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return b.end(err)
			}
		}
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) && !errors.Is(pe.Err, csv.ErrQuote) && !errors.Is(pe.Err, csv.ErrBareQuote) {
				res.read++
				res.reject("line", pe.StartLine, pe.Err)
				continue
			}
			return b.end(err)
		}
		res.read++
		line, _ := cr.FieldPos(0) // a record was read: field 0 exists
		p := engine.Point{Measurement: rec[0]}
		for i, k := range tagKeys {
			if v := rec[1+i]; v != "" {
				p.Tags = append(p.Tags, engine.Tag{Key: k, Value: v})
			}
		}
		t, err := strconv.ParseInt(rec[n-3], 10, 64)
		if err != nil {
			res.reject("line", line, fmt.Errorf("time %q: %w", rec[n-3], err))
			continue
		}
		v, err := parseKindValue(rec[n-2], rec[n-1])
		if err != nil {
			res.reject("line", line, fmt.Errorf("value %q: %w", rec[n-1], err))
			continue
		}
		p.Time = t
		p.Fields = []engine.Field{{Key: rec[n-4], Value: v}}
		if err := b.add(p, line); err != nil {
			return err
		}
	}
	return b.end(nil)
}

// importParquet loads a Parquet file as export writes it. The Parquet
// library may panic on a damaged file: that is reported as an error, with
// the points read before it written.
func importParquet(ctx context.Context, db *engine.DB, r io.ReaderAt, size int64, res *importResult) (err error) {
	b := &pointBatch{db: db, res: res, where: "row"}
	defer func() {
		if p := recover(); p != nil {
			err = b.end(fmt.Errorf("damaged parquet file (after row %d): %v", res.read, p))
		}
	}()
	f, err := parquet.OpenFile(r, size)
	if err != nil {
		return fmt.Errorf("open parquet: %w", err)
	}
	schema := f.Schema()
	idx := columnIndexes(schema)
	for _, c := range []string{colMeasurement, colField, colTime} {
		if _, ok := idx[c]; !ok {
			return fmt.Errorf("parquet file has no %q column: not written by strata export", c)
		}
	}
	kindOf := make(map[int]engine.Kind)
	for k, c := range parquetValueColumns {
		if i, ok := idx[c]; ok {
			kindOf[i] = k
		}
	}
	tagOf := make(map[int]string)
	for name, i := range idx {
		if !reservedColumn(name) {
			tagOf[i] = tagKeyOfColumn(name)
		}
	}
	mi, fi, ti := idx[colMeasurement], idx[colField], idx[colTime]
	rows := make([]parquet.Row, 1024)
	for _, rg := range f.RowGroups() {
		rr := rg.Rows()
		for {
			if err := ctx.Err(); err != nil {
				rr.Close()
				return b.end(err)
			}
			n, rerr := rr.ReadRows(rows)
			for _, row := range rows[:n] {
				res.read++
				p, err := parquetPoint(row, mi, fi, ti, kindOf, tagOf)
				if err != nil {
					res.reject("row", res.read, err)
					continue
				}
				if err := b.add(p, res.read); err != nil {
					rr.Close()
					return err
				}
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				rr.Close()
				return b.end(fmt.Errorf("read parquet rows: %w", rerr))
			}
		}
		rr.Close()
	}
	return b.end(nil)
}

// parquetPoint maps one row to a point.
func parquetPoint(row parquet.Row, mi, fi, ti int, kindOf map[int]engine.Kind, tagOf map[int]string) (engine.Point, error) {
	var p engine.Point
	var field string
	var val engine.Value
	nvals, haveTime := 0, false
	for _, v := range row {
		c := v.Column()
		if v.IsNull() {
			continue
		}
		switch {
		case c == mi:
			p.Measurement = string(v.ByteArray())
		case c == fi:
			field = string(v.ByteArray())
		case c == ti:
			p.Time, haveTime = v.Int64(), true
		default:
			if k, ok := kindOf[c]; ok {
				nvals++
				switch k {
				case engine.KindFloat:
					val = engine.Float(v.Double())
				case engine.KindInt:
					val = engine.Int(v.Int64())
				case engine.KindUint:
					val = engine.Uint(uint64(v.Int64()))
				case engine.KindBool:
					val = engine.Bool(v.Boolean())
				default:
					val = engine.String(string(v.ByteArray()))
				}
			} else if key, ok := tagOf[c]; ok {
				p.Tags = append(p.Tags, engine.Tag{Key: key, Value: string(v.ByteArray())})
			}
		}
	}
	switch {
	case !haveTime:
		return p, errors.New("no time")
	case nvals != 1:
		return p, fmt.Errorf("%d value columns set, want exactly one", nvals)
	}
	p.Fields = []engine.Field{{Key: field, Value: val}}
	return p, nil
}
