package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// Every command follows one convention: `-h`/`--help` prints the command's
// usage (usage line naming every flag, a description, examples, then the
// flags) on stdout and exits 0; a usage error prints a message and the usage
// on stderr and exits 2.

// setUsage installs a command's usage: line is the part after "usage: ",
// about the description and examples (ending in a newline).
func setUsage(fs *flag.FlagSet, line, about string) {
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "usage: %s\n\n%s\nflags:\n", line, about)
		fs.PrintDefaults()
	}
}

// parseFlags parses a command's arguments. With interspersed, flags may
// follow positional arguments. It returns the positional arguments; when
// done is true the command ends with exit status code (0 after --help, 2
// after a usage error), its usage already printed. After parseFlags, the
// flag set writes to stderr.
func parseFlags(fs *flag.FlagSet, args []string, interspersed bool, stdout, stderr io.Writer) (pos []string, code int, done bool) {
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	defer fs.SetOutput(stderr)
	var err error
	if interspersed {
		pos, err = parseInterspersed(fs, args)
	} else if err = fs.Parse(args); err == nil {
		pos = fs.Args()
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		_, _ = buf.WriteTo(stdout)
		return nil, 0, true
	case err != nil:
		_, _ = buf.WriteTo(stderr)
		return nil, 2, true
	}
	return pos, 0, false
}

// parseInterspersed parses flags that may follow positional arguments
// (`show EFFECT --endpoint URL`) and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

// command is one subcommand's entry point.
type command func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// dispatch runs the subcommand of `idemkit NAME` that args name. With no
// subcommand, or an unknown one, it prints the usage on stderr and returns
// 2; with -h/--help/help it prints the usage on stdout and returns 0.
func dispatch(ctx context.Context, name, usage string, cmds map[string]command, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
	case isHelp(args[0]):
		fmt.Fprint(stdout, usage)
		return 0
	case cmds[args[0]] != nil:
		return cmds[args[0]](ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "idemkit %s: unknown command %q\n\n", name, args[0])
	}
	fmt.Fprint(stderr, usage)
	return 2
}

// parseOneArg is parseFlags (flags and arguments interspersed) for a command
// that takes exactly one argument: any other count prints the usage and is
// a usage error (exit 2).
func parseOneArg(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (arg string, code int, done bool) {
	pos, code, done := parseFlags(fs, args, true, stdout, stderr)
	if done {
		return "", code, true
	}
	if len(pos) != 1 {
		fs.Usage()
		return "", 2, true
	}
	return pos[0], 0, false
}
