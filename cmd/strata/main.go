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
	os.Exit(runMain(os.Args[1:]))
}

// runMain runs the command line args (without the program name) and
// returns the exit status.
func runMain(args []string) int {
	if len(args) >= 1 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		fmt.Println(versionString())
		return 0
	}
	if len(args) < 1 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) >= 2 && args[0] == "help" {
			// strata help CMD is strata CMD --help.
			if len(args) > 2 {
				fmt.Fprintf(os.Stderr, "strata help: unexpected argument %q\n", args[2])
				return exitUsage
			}
			return runMain([]string{args[1], "--help"})
		}
		usage()
		if len(args) < 1 {
			return exitUsage
		}
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "strata: unknown command %q\n\n", args[0])
		usage()
		return exitUsage
	}
	return c.run(args[1:])
}

// The exit statuses every command shares (docs/operations.md, "The command
// line"). A usage error is a command line that is wrong in itself: an
// unknown flag, a flag value that does not parse or makes no sense, flags
// that do not go together, a missing or extra argument. It is found before
// anything is opened, created or sent. Everything found later (a file or
// database that cannot be opened, a full disk, a server that does not
// answer) is a failure. The commands whose outcome has a third state,
// "done, but something was found" (verify: damage; repair: losses; ingest
// and import: rejected lines; bench: a wrong query answer), exit 1 for it
// and 2 for a failure, as grep and diff do; ingest also exits 3 when
// interrupted. --help exits exitOK and prints to stderr.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

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
		"'strata --version' for the version. Exit status: 0 success, 1 failure, 2 bad usage\n" +
		"(each command's --help says more).\n\nexample:\n  strata query --db ./data --measurement sensor --agg mean --group-by site --start -1d\n")
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
// command should stop: exitOK after --help, exitUsage after a flag error.
func parseFlags(fs *flag.FlagSet, args []string) (status int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, true
		}
		return exitUsage, true
	}
	return exitOK, false
}

// usageFail returns the usage-error reporter of the command whose flag set
// is fs: it prints "strata NAME: message" and the usage on stderr and
// returns exitUsage.
func usageFail(fs *flag.FlagSet, stderr io.Writer) func(format string, a ...any) int {
	return func(format string, a ...any) int {
		fmt.Fprintf(stderr, "strata %s: %s\n", fs.Name(), fmt.Sprintf(format, a...))
		fs.Usage()
		return exitUsage
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

// flagGiven reports whether the flag name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// readTokenFile returns the token held in the file at path, without
// surrounding white space; an empty one is an error.
func readTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return token, nil
}
