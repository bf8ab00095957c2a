package main

import (
	"flag"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/forward"
)

// Every field of forward.Options that a command line can set has a
// --forward-* flag, and the flag's value reaches the field: a field added
// to Options without a flag fails here.
func TestServeForwardFlagsCoverOptions(t *testing.T) {
	// Fields no flag can carry: the library's hooks.
	noFlag := map[string]bool{"Client": true, "Logger": true, "Now": true}
	// Flag names that are not the kebab-case of their field.
	names := map[string]string{"URL": "forward-url", "Headers": "forward-header"}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ff := addForwardFlags(fs)
	typ := reflect.TypeFor[forward.Options]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		if noFlag[name] || !typ.Field(i).IsExported() {
			continue
		}
		fl, ok := names[name]
		if !ok {
			fl = "forward-" + kebab(name)
		}
		if fs.Lookup(fl) == nil {
			t.Errorf("forward.Options.%s has no --%s flag", name, fl)
		}
	}

	err := fs.Parse([]string{
		"--forward-url", "http://127.0.0.1:1/api/v1/write", "--forward-protocol", "influx",
		"--forward-dir", "/q", "--forward-batch-size", "7", "--forward-linger", "3ms",
		"--forward-max-backlog-bytes", "12345", "--forward-max-backlog-age", "2s",
		"--forward-min-backoff", "5ms", "--forward-max-backoff", "6s", "--forward-timeout", "4s",
		"--forward-segment-bytes", "65536", "--forward-sync-interval", "250ms",
		"--forward-header", "Authorization: Bearer T", "--forward-header", "X-Org: a",
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ff.options()
	if err != nil {
		t.Fatal(err)
	}
	want := forward.Options{
		URL: "http://127.0.0.1:1/api/v1/write", Protocol: forward.Influx, Dir: "/q",
		BatchSize: 7, Linger: 3 * time.Millisecond, MaxBacklogBytes: 12345, MaxBacklogAge: 2 * time.Second,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 6 * time.Second, Timeout: 4 * time.Second,
		SegmentBytes: 65536, SyncInterval: 250 * time.Millisecond,
		Headers: http.Header{"Authorization": {"Bearer T"}, "X-Org": {"a"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("options:\n got %+v\nwant %+v", got, want)
	}
	if err := fs.Parse([]string{"--forward-header", "no colon"}); err == nil {
		t.Error("--forward-header without a colon accepted")
	}
}

// kebab turns MaxBacklogAge into max-backlog-age.
func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
