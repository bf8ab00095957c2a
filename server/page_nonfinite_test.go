package server

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestPageBrowserNonFinite: sample values the query API and the status
// endpoint write as "+Inf", "-Inf" and "NaN" show as such, in the series
// list and in the chart's legend (where they are gaps: the chart cannot
// place them), while a missing value still shows as "–". The engine
// stores no such value, so the answers are rewritten on their way in.
func TestPageBrowserNonFinite(t *testing.T) {
	ctx, must, run, poll := openKnownPage(t)
	eval := func(expr string, v any) {
		t.Helper()
		b, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr))
		must(err)
		must(json.Unmarshal(b, v))
	}
	// power_watts{phase="L1"} is +Inf, L2 -Inf, L3 NaN: the latest value
	// and the chart's newest three samples.
	run(`(() => {
		const special = {L1: "+Inf", L2: "-Inf", L3: "NaN"};
		const orig = window.fetch;
		window.fetch = (path, opts) => orig(path, opts).then((r) => {
			const json = r.json.bind(r);
			if (path === "/api/v1/status/strata") {
				r.json = () => json().then((j) => {
					for (const s of j.data.latest || []) if (special[s.metric.phase]) s.value[1] = special[s.metric.phase];
					return j;
				});
			} else if (path === "/api/v1/query_range") {
				r.json = () => json().then((j) => {
					for (const s of j.data.result) {
						const n = s.values.length;
						if (n >= 3) { s.values[n - 1][1] = "+Inf"; s.values[n - 2][1] = "-Inf"; s.values[n - 3][1] = "NaN"; }
						window.rewrittenTimes = s.values.slice(n - 3).map((v) => v[0]);
					}
					return j;
				});
			}
			return r;
		});
	})()`)
	run(`document.querySelector('#measurements button[data-measurement="power"]').click()`)
	poll(`document.querySelectorAll("#series button").length === 3 &&
		[...document.querySelectorAll("#series button")].every(b => b.dataset.value !== undefined)`)
	var shown map[string]string
	eval(`Object.fromEntries([...document.querySelectorAll("#series button")].map(b =>
		[b.dataset.value, b.querySelector(".value").firstChild.textContent]))`, &shown)
	for raw, want := range map[string]string{"+Inf": "+Inf W", "-Inf": "-Inf W", "NaN": "NaN W"} {
		if shown[raw] != want {
			t.Errorf("latest value %q shows as %q, want %q (all: %q)", raw, shown[raw], want, shown)
		}
	}

	// Chart the first series; its legend at the rewritten samples and at a
	// step without a sample.
	run(`document.querySelector('#series button').click()`)
	poll(`window.strata.plot !== null && window.rewrittenTimes !== undefined &&
		window.strata.plot.data[0].includes(window.rewrittenTimes[2])`)
	var legend struct {
		At      []string
		Missing string
		Plotted []any
		Finite  bool
	}
	eval(`(() => {
		const p = window.strata.plot, xs = p.data[0], ys = p.data[1];
		const at = window.rewrittenTimes.map((t) => xs.indexOf(t));
		const gap = ys.findIndex((v, i) => v == null && !at.includes(i));
		return {
			at: at.map((i) => p.series[1].value(p, ys[i], 1, i)),
			missing: p.series[1].value(p, ys[gap], 1, gap),
			plotted: at.map((i) => ys[i]),
			finite: Number.isFinite(p.scales.y0.min) && Number.isFinite(p.scales.y0.max),
		};
	})()`, &legend)
	if want := []string{"NaN W", "-Inf W", "+Inf W"}; len(legend.At) != 3 || legend.At[0] != want[0] || legend.At[1] != want[1] || legend.At[2] != want[2] {
		t.Errorf("legend at the rewritten samples: %q, want %q", legend.At, want)
	}
	if legend.Missing != "–" {
		t.Errorf("legend at a step without a sample: %q, want \"–\"", legend.Missing)
	}
	for i, v := range legend.Plotted {
		if v != nil {
			t.Errorf("rewritten sample %d plotted as %v, want a gap", i, v)
		}
	}
	if !legend.Finite {
		t.Error("the chart's value scale is not finite")
	}
}
