package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
)

// What the reports (Report, ScaleReport, MixedReport) share when they write
// themselves: the JSON and CSV framing, the cell formats and the machine
// line of the Markdown.

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeCSV writes the header row, then rows.
func writeCSV(w io.Writer, header []string, rows [][]string) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return err
	}
	for _, rec := range rows {
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ftoa formats v exactly, as the CSV cells hold it.
func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// itoa formats v, as the CSV cells hold it.
func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// mib formats a byte count in MiB with one decimal.
func mib(v int64) string { return strconv.FormatFloat(float64(v)/(1<<20), 'f', 1, 64) }

// optional formats *v with f, or is none when v is nil: a figure that was
// not measured ("" in CSV, "-" in Markdown).
func optional[T any](v *T, f func(T) string, none string) string {
	if v == nil {
		return none
	}
	return f(*v)
}

// markdownLine is the machine line that starts every Markdown report.
func (m Machine) markdownLine() string {
	return fmt.Sprintf("Machine: %s, %d cores, %s, %s%s\n\n", m.CPU, m.Cores, m.OS, m.Go, m.loadNote())
}

// scratchDir makes a scratch directory for a bench's jobs in dir (created
// if missing; the system's temp dir when empty), its name starting with
// prefix. The caller removes it.
func scratchDir(dir, prefix string) (string, error) {
	if dir != "" {
		if err := mkdir(dir); err != nil {
			return "", err
		}
	}
	scratch, err := os.MkdirTemp(dir, prefix)
	if err != nil {
		return "", fmt.Errorf("bench: scratch directory: %w", err)
	}
	return scratch, nil
}
