// Command strata is the command-line tool of the strata time-series engine:
// benchmarks, ingest of line protocol, queries, file inspection and an HTTP
// server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
)

// command is one subcommand. run gets the arguments after the subcommand's
// name and returns the process exit status.
type command struct {
	summary string
	run     func(args []string) int
}

// signalCommand is the command that runs main with the process's stdout
// and stderr and a context that SIGINT or SIGTERM cancels.
func signalCommand(summary string, main func(ctx context.Context, args []string, stdout, stderr io.Writer) int) command {
	return command{summary: summary, run: func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return main(ctx, args, os.Stdout, os.Stderr)
	}}
}

// commands is filled by the init functions of the files that define them
// (bench.go, ingest.go, ...).
var commands = map[string]command{}

// version is the tool's version; release builds set it with
// -ldflags "-X main.version=v1.2.3". Otherwise the module version from the
// build info is used when there is one.
var version = ""

func versionString() string {
	v := version
	if v == "" {
		v = "devel"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
	}
	return fmt.Sprintf("strata %s (%s %s/%s)", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func main() {
	if len(os.Args) >= 2 && (os.Args[1] == "--version" || os.Args[1] == "-version" || os.Args[1] == "version") {
		fmt.Println(versionString())
		return
	}
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "strata: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	os.Exit(c.run(os.Args[2:]))
}

func usage() {
	var b strings.Builder
	b.WriteString("usage: strata <command> [flags]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-13s %s\n", n, commands[n].summary)
	}
	b.WriteString("\nRun 'strata <command> --help' for a command's flags and examples,\n" +
		"'strata --version' for the version.\n\nexample:\n  strata query --db ./data --measurement sensor --agg mean --group-by site --start -1d\n")
	fmt.Fprint(os.Stderr, b.String())
}

// newFlags returns the flag set of a subcommand: errors and its usage (the
// text, then the flags) go to stderr.
func newFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage+"\n\nflags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; it returns done with the exit status when the
// command should stop: 0 after --help, 2 after a flag error.
func parseFlags(fs *flag.FlagSet, args []string) (status int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	return 0, false
}

// usageFail returns the usage-error reporter of the command whose flag set
// is fs: it prints "strata NAME: message" and the usage on stderr and
// returns the exit status 2.
func usageFail(fs *flag.FlagSet, stderr io.Writer) func(format string, a ...any) int {
	return func(format string, a ...any) int {
		fmt.Fprintf(stderr, "strata %s: %s\n", fs.Name(), fmt.Sprintf(format, a...))
		fs.Usage()
		return 2
	}
}

// failWith returns the error reporter of the command name: it prints
// "strata NAME: err" on stderr and returns status.
func failWith(stderr io.Writer, name string, status int) func(error) int {
	return func(err error) int {
		fmt.Fprintf(stderr, "strata %s: %v\n", name, err)
		return status
	}
}
