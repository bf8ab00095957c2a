package main

import (
	"context"
	"fmt"
	"io"

	"github.com/stratadb/strata/engine"
)

func init() {
	commands["repair"] = signalCommand("rebuild a damaged database's manifest and set damaged files aside", repairMain)
}

// repairMain is the repair command. Exit status 0 when nothing was lost,
// 1 when the database was repaired with losses (listed), 2 when it could
// not be repaired or on a usage error.
func repairMain(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("repair", "usage: strata repair --db DIR\n\n"+
		"Repair a database that Open reports as corrupt: check every segment block by block,\n"+
		"keep the manifest or rebuild it from the intact segments, replay the WAL up to its first\n"+
		"damage, and rename every file that cannot be used to NAME.damaged (nothing is deleted).\n"+
		"Stop the process that writes the database first. Prints what it could not recover.\n"+
		"Exit status: 0 nothing lost, 1 repaired with losses, 2 not repaired, or bad usage.\n\n"+
		"example:\n  strata repair --db ./data", stderr)
	dir := fs.String("db", "", "database directory (required)")
	if st, done := parseFlags(fs, args); done {
		return st
	}
	usageErr := usageFail(fs, stderr)
	switch {
	case *dir == "":
		return usageErr("--db is required")
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	rep, err := engine.Repair(*dir, nil)
	for _, s := range rep.SetAside {
		fmt.Fprintf(stdout, "set aside: %s\n", s)
	}
	for _, s := range rep.Lost {
		fmt.Fprintf(stdout, "not recovered: %s\n", s)
	}
	if err != nil {
		fmt.Fprintf(stderr, "strata repair: %v\n", err)
		return 2
	}
	rebuilt := "kept"
	if rep.ManifestRebuilt {
		rebuilt = "rebuilt"
	}
	fmt.Fprintf(stdout, "manifest %s, %d segments, %d wal bytes set aside\n", rebuilt, rep.Segments, rep.WALBytesDropped)
	if len(rep.Lost) > 0 {
		return 1
	}
	fmt.Fprintln(stdout, "ok")
	return 0
}
