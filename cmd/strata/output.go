package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"golang.org/x/term"

	"github.com/stratadb/strata/engine"
)

// Output formats of the read commands: csv and json for programs, table
// for people (the default on a terminal; csv otherwise).
const (
	formatCSV   = "csv"
	formatJSON  = "json"
	formatTable = "table"
)

func addFormatFlag(fs *flag.FlagSet) *string {
	return fs.String("format", "", "output format: csv, json or table (default: table on a terminal, csv otherwise)")
}

// resolveFormat checks f, picking the default for stdout when it is "".
func resolveFormat(f string, stdout io.Writer) (string, error) {
	switch f = strings.ToLower(f); f {
	case formatCSV, formatJSON, formatTable:
		return f, nil
	case "":
		if file, ok := stdout.(*os.File); ok && term.IsTerminal(int(file.Fd())) {
			return formatTable, nil
		}
		return formatCSV, nil
	}
	return "", fmt.Errorf("unknown --format %q: want csv, json or table", f)
}

// rowWriter writes rows of strings as CSV or an aligned table.
type rowWriter struct {
	csv *csv.Writer
	tab *tabwriter.Writer
	buf *bufio.Writer
}

func newRowWriter(format string, w io.Writer, header ...string) *rowWriter {
	rw := &rowWriter{buf: bufio.NewWriter(w)}
	if format == formatTable {
		rw.tab = tabwriter.NewWriter(rw.buf, 0, 4, 2, ' ', 0)
		for i := range header {
			header[i] = strings.ToUpper(header[i])
		}
	} else {
		rw.csv = csv.NewWriter(rw.buf)
	}
	rw.row(header...)
	return rw
}

func (rw *rowWriter) row(cells ...string) {
	if rw.csv != nil {
		rw.csv.Write(cells)
		return
	}
	fmt.Fprintln(rw.tab, strings.Join(cells, "\t"))
}

func (rw *rowWriter) close() error {
	if rw.csv != nil {
		rw.csv.Flush()
		if err := rw.csv.Error(); err != nil {
			return err
		}
	} else if err := rw.tab.Flush(); err != nil {
		return err
	}
	return rw.buf.Flush()
}

// seriesWriter writes query results one series at a time, so a result
// never needs to sit in memory whole. A long series arrives in parts
// (engine.DB.QuerySeq); in JSON a part continues the open object.
type seriesWriter struct {
	format string
	rows   *rowWriter
	json   *bufio.Writer
	open   string // key of the JSON object whose samples array is open
	n      int
}

func newSeriesWriter(format string, w io.Writer) *seriesWriter {
	sw := &seriesWriter{format: format}
	if format == formatJSON {
		sw.json = bufio.NewWriter(w)
		sw.json.WriteString("[")
	} else {
		sw.rows = newRowWriter(format, w, "series", "time", "value")
	}
	return sw
}

// jsonSeries is the JSON form of a result series.
type jsonSeries struct {
	Measurement string            `json:"measurement"`
	Tags        map[string]string `json:"tags"`
	Field       string            `json:"field"`
	Samples     []jsonSample      `json:"samples"`
}

type jsonSample struct {
	Time   string `json:"time"`
	UnixNs int64  `json:"unix_ns"`
	Value  any    `json:"value"`
}

func jsonValue(v engine.Value) any {
	switch v.Kind() {
	case engine.KindFloat:
		return v.Float()
	case engine.KindInt:
		return v.Int()
	case engine.KindUint:
		return v.Uint()
	case engine.KindBool:
		return v.Bool()
	}
	return v.Str()
}

func tagMap(tags []engine.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[t.Key] = t.Value
	}
	return m
}

func (sw *seriesWriter) write(s engine.Series) error {
	if sw.json != nil {
		key := engine.SeriesKey(s.Measurement, s.Tags, s.Field)
		cont := sw.n > 0 && key == sw.open
		if !cont {
			// The object without its samples, then an open samples array.
			b, err := json.Marshal(jsonSeries{Measurement: s.Measurement, Tags: tagMap(s.Tags), Field: s.Field, Samples: []jsonSample{}})
			if err != nil {
				return err
			}
			if sw.n > 0 {
				sw.json.WriteString("]},")
			}
			sw.json.WriteString("\n")
			sw.json.Write(bytes.TrimSuffix(b, []byte("]}")))
			sw.open = key
			sw.n++
		}
		for i, smp := range s.Samples {
			b, err := json.Marshal(jsonSample{Time: formatTime(smp.Time), UnixNs: smp.Time, Value: jsonValue(smp.Value)})
			if err != nil {
				return err
			}
			if cont || i > 0 {
				sw.json.WriteString(",")
			}
			sw.json.Write(b)
		}
		return nil
	}
	key := engine.SeriesKey(s.Measurement, s.Tags, s.Field) // canonical, escaped
	for _, smp := range s.Samples {
		sw.rows.row(key, formatTime(smp.Time), smp.Value.String())
	}
	sw.n++
	return nil
}

func (sw *seriesWriter) close() error {
	if sw.json != nil {
		if sw.n > 0 {
			sw.json.WriteString("]}")
		}
		sw.json.WriteString("\n]\n")
		return sw.json.Flush()
	}
	return sw.rows.close()
}

// writeStrings writes a list (measurements, tag keys or values) under a
// one-column header, or as a JSON array.
func writeStrings(format string, w io.Writer, header string, list []string) error {
	if format == formatJSON {
		if list == nil {
			list = []string{}
		}
		b, err := json.Marshal(list)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	rw := newRowWriter(format, w, header)
	for _, s := range list {
		rw.row(s)
	}
	return rw.close()
}
