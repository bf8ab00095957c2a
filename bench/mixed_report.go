package bench

import (
	"fmt"
	"io"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"
)

// WriteJSON writes the mixed report as indented JSON.
func (rep *MixedReport) WriteJSON(w io.Writer) error { return writeJSON(w, rep) }

// mixedCSVHeader names the mixed CSV columns (the JSON names, with the
// latency objects flattened as write_p50_ms, point_query_p99_ms, ...).
var mixedCSVHeader = func() []string {
	h := []string{"engine", "peak_points_per_sec", "target_points_per_sec", "achieved_points_per_sec", "points_written"}
	for _, op := range []string{"write", QueryPoint, QueryRange, QueryAgg} {
		h = append(h, op+"_count", op+"_p50_ms", op+"_p99_ms", op+"_max_ms")
	}
	return append(h, "write_lag_max_ms", "write_stalls", "engine_write_stalls", "compactions",
		"answers", "answers_checked_in_full", "disk_bytes", "peak_rss_bytes")
}()

// WriteCSV writes one row per engine after a header row; the throughput
// over time is in the JSON only.
func (rep *MixedReport) WriteCSV(w io.Writer) error {
	rows := make([][]string, 0, len(rep.Results))
	for _, r := range rep.Results {
		rec := []string{r.Engine, ftoa(r.PeakPointsPerSec), ftoa(r.TargetPointsPerSec), ftoa(r.AchievedPointsPerSec), itoa(r.PointsWritten)}
		for _, l := range []Latency{r.Write, r.Queries[QueryPoint], r.Queries[QueryRange], r.Queries[QueryAgg]} {
			rec = append(rec, itoa(l.Count), ftoa(l.P50Ms), ftoa(l.P99Ms), ftoa(l.MaxMs))
		}
		rec = append(rec, ftoa(r.WriteLagMaxMs), itoa(r.WriteStalls), optional(r.EngineWriteStalls, itoa, ""), optional(r.Compactions, itoa, ""),
			itoa(r.Answers), itoa(r.AnswersCheckedInFull), itoa(r.DiskBytes), itoa(r.PeakRSSBytes))
		rows = append(rows, rec)
	}
	return writeCSV(w, mixedCSVHeader, rows)
}

// WriteMarkdown writes the machine and workload lines and two tables: the
// writes, and the latency of each query.
func (rep *MixedReport) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	m := rep.Machine
	b.WriteString(m.markdownLine())
	fmt.Fprintf(&b, "Mixed workload: %s series, batches of %s, writer at %.0f%% of each engine's peak rate (measured unthrottled for %s first) for %s, %d reader goroutine(s) running the point query (last 60 s of one device), the range scan (last 600 s of all) and the 1-minute means (last 1,000 s of all) in a loop; %s/%s.\n\n",
		thousands(float64(rep.Devices)), thousands(float64(rep.Batch)), rep.Share*100,
		secs(rep.CalibSec), secs(rep.DurationSec), rep.Readers, rep.Config, rep.Durability)
	b.WriteString("| engine | peak points/s | target | achieved | write p50 ms | p99 | max | max lag ms | stalls | engine stalls | compactions | peak RSS MiB | disk MiB |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	opt := func(v *int64) string { return optional(v, itoa, "-") }
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s |\n", r.Engine,
			thousands(r.PeakPointsPerSec), thousands(r.TargetPointsPerSec), thousands(r.AchievedPointsPerSec),
			millis(r.Write.P50Ms), millis(r.Write.P99Ms), millis(r.Write.MaxMs), millis(r.WriteLagMaxMs),
			r.WriteStalls, opt(r.EngineWriteStalls), opt(r.Compactions), mib(r.PeakRSSBytes), mib(r.DiskBytes))
	}
	b.WriteString("\n| engine | point query p50 ms | p99 | max | count | range scan p50 ms | p99 | max | count | agg mean p50 ms | p99 | max | count | answers checked in full |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "| %s", r.Engine)
		for _, name := range []string{QueryPoint, QueryRange, QueryAgg} {
			l := r.Queries[name]
			fmt.Fprintf(&b, " | %s | %s | %s | %d", millis(l.P50Ms), millis(l.P99Ms), millis(l.MaxMs), l.Count)
		}
		fmt.Fprintf(&b, " | %d of %d |\n", r.AnswersCheckedInFull, r.Answers)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// secs formats seconds as a duration rounded to 10 ms: 6.67s, 20s, 30m0s.
func secs(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(10 * time.Millisecond).String()
}

// WriteSVG draws the throughput over time: points written and queries
// answered per second, one line per engine, the floor dashed; and, where
// it was measured, the resident memory.
func (rep *MixedReport) WriteSVG(w io.Writer) error {
	var writes, reads, rss []line
	for _, r := range rep.Results {
		lw := line{name: r.Engine, floor: IsFloor(r.Engine)}
		lr, lm := lw, lw
		for _, s := range r.Throughput {
			lw.xys = append(lw.xys, plotter.XY{X: float64(s.Second), Y: float64(s.Points)})
			lr.xys = append(lr.xys, plotter.XY{X: float64(s.Second), Y: float64(s.Queries)})
			if s.RSSBytes > 0 {
				lm.xys = append(lm.xys, plotter.XY{X: float64(s.Second), Y: float64(s.RSSBytes) / (1 << 20)})
			}
		}
		writes, reads = append(writes, lw), append(reads, lr)
		if len(lm.xys) > 0 {
			rss = append(rss, lm)
		}
	}
	mode := fmt.Sprintf("%.0f%% of peak, %d readers, %s/%s", rep.Share*100, rep.Readers, rep.Config, rep.Durability)
	charts := []lineChart{
		{title: "Points written per second, mixed workload (" + mode + ")",
			xlabel: "time since start (s)", ylabel: "points/s", lines: writes, fromZero: true},
		{title: "Queries answered per second, mixed workload, higher is better",
			xlabel: "time since start (s)", ylabel: "queries/s", lines: reads, fromZero: true},
	}
	if len(rss) > 0 {
		charts = append(charts, lineChart{title: "Resident memory of the process under test, mixed workload (flat in steady state)",
			xlabel: "time since start (s)", ylabel: "RSS (MiB)", lines: rss, fromZero: true})
	}
	return writeCharts(w, charts)
}
