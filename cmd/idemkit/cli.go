package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/functions/host/apikeys"
)

// Every command follows one rule (stated in `idemkit -h`, exitRule, and in
// docs/CLI.md): `-h`/`--help` prints the command's usage (usage line naming
// every flag, a description, examples, then the flags) on stdout and exits
// 0; a usage error (a missing or invalid flag or argument) prints one line
// naming it and a hint naming -h (usageHint) on stderr and exits 2, before
// anything is reached (parseFlags, usageError); a failure at run time
// exits 1; success exits 0.

// exitRule is the exit status rule every command follows, as `idemkit -h`
// states it.
const exitRule = `exit status:
  0  success
  1  a failure at run time (an engine or API that does not answer, a table
     missing or different, a scenario failed, a refused resolution)
  2  a usage error (a missing or invalid flag or argument): one line naming
     it, then "run 'idemkit COMMAND -h' for help"
`

// setUsage installs a command's usage: line is the part after "usage: ",
// about the description and examples (ending in a newline), then the
// flags under a "flags:" heading (none for a command without flags).
func setUsage(fs *flag.FlagSet, line, about string) {
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "usage: %s\n\n%s", line, about)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprint(out, "\nflags:\n")
			var b bytes.Buffer
			fs.SetOutput(&b)
			fs.PrintDefaults()
			fs.SetOutput(out)
			fmt.Fprint(out, twoDashes.ReplaceAllString(b.String(), "$1--"))
		}
	}
}

// twoDashes finds the dash that starts each flag's line in the flag
// package's list ("  -endpoint URL"): the help names every flag as the
// usage lines and docs/CLI.md do, with two ("  --endpoint URL"); each
// flag takes either form.
var twoDashes = regexp.MustCompile(`(?m)^(  )-`)

// parseFlags parses a command's arguments. With interspersed, flags may
// follow positional arguments. It returns the positional arguments; when
// done is true the command ends with exit status code: 0 after --help (the
// usage printed on stdout), 2 after a usage error (the flag package's one
// line naming the flag, then usageHint, on stderr; the usage is not
// repeated; likewise a --region or --*-region value no endpoint can be
// named with, regionOK). After parseFlags, the flag set writes to stderr.
func parseFlags(fs *flag.FlagSet, args []string, interspersed bool, stdout, stderr io.Writer) (pos []string, code int, done bool) {
	if name, next := missingValue(fs, args); name != "" {
		fs.SetOutput(stderr)
		return nil, usageError(fs, stderr, "--%s needs a value: the argument after it, %q, is a flag (for that value itself, write --%s=%s)", name, next, name, next), true
	}
	usage := fs.Usage
	fs.Usage = func() {} // the flag package calls it on -h and after its error line
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	empty, twice := refuseEmpty(fs)
	var err error
	if interspersed {
		pos, err = parseInterspersed(fs, args)
	} else if err = fs.Parse(args); err == nil {
		pos = fs.Args()
	}
	fs.VisitAll(func(f *flag.Flag) { // the flags as they were defined again
		if v, ok := f.Value.(nonEmpty); ok {
			f.Value = v.Value
		}
	})
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(stderr)
		return nil, 0, true
	case err != nil && *empty != "":
		fs.SetOutput(stderr)
		return nil, usageError(fs, stderr, "empty value for --%s: give a value, or leave the flag out", *empty), true
	case err != nil && *twice != "":
		fs.SetOutput(stderr)
		return nil, usageError(fs, stderr, "--%s is given twice: it takes one value; give it once", *twice), true
	case err != nil:
		fs.SetOutput(stderr)
		line := "idemkit " + fs.Name() + ": " + flagDashes.Replace(hideSecretValue(strings.TrimSuffix(buf.String(), "\n")))
		if why := outOfRange(fs, err); why != "" {
			line = strings.TrimSuffix(line, "parse error") + why
		} else if want := acceptedValue(fs, err); want != "" {
			line += "; " + want
		}
		fmt.Fprintln(stderr, line)
		usageHint(fs, stderr)
		return nil, 2, true
	}
	fs.SetOutput(stderr)
	// A region names an endpoint's host: one the SDK cannot put in a host
	// name is refused here, not by its endpoint rules at run time.
	bad := ""
	fs.Visit(func(f *flag.Flag) {
		if bad == "" && (f.Name == "region" || strings.HasSuffix(f.Name, "-region")) && !regionOK(f.Value.String()) {
			bad = f.Name
		}
	})
	if bad != "" {
		return nil, usageError(fs, stderr, "--%s %q: want an AWS region, such as us-east-1 (letters, digits and '-', not first or last)", bad, fs.Lookup(bad).Value.String()), true
	}
	return pos, 0, false
}

// missingValue finds a flag given without its value, followed by another
// of the command's flags (`--api-key --api-key K2`, `--endpoint --table T`:
// an unset shell variable), which the flag package would take as the
// value: the flag's name and that argument; "" when there is none. A
// value that only starts with '-' (`--limit -3`) is not a flag of the
// command and is left to the flag's own check.
func missingValue(fs *flag.FlagSet, args []string) (name, next string) {
	flagOf := func(a string) *flag.Flag {
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			return nil
		}
		n, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		return fs.Lookup(n)
	}
	for i, a := range args {
		if a == "--" {
			break
		}
		f := flagOf(a)
		if f == nil || strings.Contains(a, "=") || i+1 >= len(args) {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue
		}
		if flagOf(args[i+1]) != nil {
			return f.Name, args[i+1]
		}
	}
	return "", ""
}

// regionOK reports whether r can name a DynamoDB endpoint's region: labels
// of 1..63 letters, digits and '-' (not first or last), separated by dots,
// as the SDK's endpoint rules require.
func regionOK(r string) bool {
	for _, l := range strings.Split(r, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
				return false
			}
		}
	}
	return true
}

// emptyAllowed are the flags whose empty value means something other than
// their default: an empty table prefix names each table by its logical ID
// alone.
var emptyAllowed = map[string]bool{"prefix": true, "table-prefix": true}

// refuseEmpty makes every flag of fs but emptyAllowed refuse an empty value
// (`--region ""`, `--note=`): a flag given is never silently its default.
// It also makes every flag whose help does not say it may be repeated
// (repeatable) refuse a second value (`--as delivered --as not-delivered`,
// `--tenant a --tenant b`): the flag package would silently take the last,
// which a command line edited from the history or a wrapper script's preset
// flag turns into the opposite of what the operator read (RED_TEAM 412).
// The name of the flag refused is put in *empty or *twice; parseFlags says
// it.
func refuseEmpty(fs *flag.FlagSet) (empty, twice *string) {
	empty, twice = new(string), new(string)
	fs.VisitAll(func(f *flag.Flag) {
		f.Value = nonEmpty{Value: f.Value, name: f.Name, allowEmpty: emptyAllowed[f.Name],
			once: !repeatable(f), set: new(bool), refused: empty, twice: twice}
	})
	return empty, twice
}

// repeatable reports whether f takes more than one value: its help says so
// ("(repeatable)", "repeat for a second tenant").
func repeatable(f *flag.Flag) bool { return strings.Contains(f.Usage, "repeat") }

// nonEmpty is a flag's Value that refuses the empty string (unless
// allowEmpty) and, when once, a second value.
type nonEmpty struct {
	flag.Value
	name       string
	allowEmpty bool
	once       bool
	set        *bool
	refused    *string
	twice      *string
}

func (v nonEmpty) Set(s string) error {
	if v.once && *v.set {
		*v.twice = v.name
		return errors.New("given twice")
	}
	*v.set = true
	if s == "" && !v.allowEmpty {
		*v.refused = v.name
		return errors.New("empty value")
	}
	return v.Value.Set(s)
}

// IsBoolFlag keeps a boolean flag one that takes no argument.
func (v nonEmpty) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// flagDashes names a flag in the flag package's refusals as the help and
// the docs do, with two dashes ("flag provided but not defined: -bogus"
// becomes "... --bogus"; likewise an invalid value, boolean or not, and a
// missing argument); every flag takes either form.
var flagDashes = strings.NewReplacer("for flag -", "for flag --", "for -", "for --", "not defined: -", "not defined: --", "needs an argument: -", "needs an argument: --")

// secretFlags name the flags whose value carries an API key (`--api-key`
// of dev, KEY=TENANT, and of conform; `--scope-key` of conform,
// PART=KEY), each with the key part of a value: a refusal of a value whose
// key could authenticate does not quote it (hideSecretValue).
var secretFlags = map[string]func(v string) string{
	"api-key": func(v string) string {
		if i := strings.LastIndexByte(v, '='); i >= 0 {
			return v[:i]
		}
		return v
	},
	"scope-key": func(v string) string {
		_, k, ok := strings.Cut(v, "=")
		if !ok {
			return v
		}
		return k
	},
}

// unexpectedSecretArg refuses arg, an argument given to a command that
// takes a key or a signing secret by flag (apikey create and revoke,
// webhook secret rotate and remove, dev), where every input is a flag: an
// argument that may be a secret (mayBeSecret) is not quoted, since it may
// be the key or secret itself, typed where a flag was meant (RED_TEAM
// 564), and stderr goes to CI logs and shared terminals; any other (a
// stray word) is quoted, to show the fault.
func unexpectedSecretArg(fs *flag.FlagSet, stderr io.Writer, arg string) int {
	if mayBeSecret(arg, "") {
		return usageError(fs, stderr, "unexpected argument (not shown; it may be a key or a secret): every input is a flag")
	}
	return usageError(fs, stderr, "unexpected argument %q (every input is a flag)", arg)
}

// mayBeSecret reports whether arg, given where no key was asked for, may
// be an API key or a signing secret, or hold one: a word of it (the bytes
// between white space and other bytes no key holds) of at least
// minSecretArg characters that the authorizer would take as a key
// (apikeys.ValidKey; a signing secret is one too) and that holds none of
// the bytes of except. The key is often copied with what surrounded it
// ("Bearer " and the key, the Authorization header whole, a trailing
// space, the carriage return of a Windows key file read by "$(cat
// key.txt)"), which the authorizer would not take as it stands but which
// holds the key all the same (RED_TEAM 583, as 563 for --hash).
func mayBeSecret(arg, except string) bool {
	for _, w := range strings.FieldsFunc(arg, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		if len(w) >= minSecretArg && apikeys.ValidKey(w) && !strings.ContainsAny(w, except) {
			return true
		}
	}
	return false
}

// minSecretArg is the length from which mayBeSecret takes an argument for
// a possible key or secret: a minted key has 36 characters, a signing
// secret more.
const minSecretArg = 16

// hideSecretValue rewrites the flag package's refusal of a secret flag's
// value ("invalid value "K=T" for flag -api-key: …") without the value
// ("invalid value (not shown) for flag -api-key: …") when its key part is
// one the authorizer would take (apikeys.ValidKey): the line goes to
// stderr, which a CI log or a shared terminal keeps. A value whose key no
// request could present is quoted, to show what is wrong with it; any
// other message is returned as is.
func hideSecretValue(msg string) string {
	const prefix, mid = "invalid value ", " for flag -"
	i := strings.LastIndex(msg, mid)
	if !strings.HasPrefix(msg, prefix) || i < len(prefix) {
		return msg
	}
	name, _, _ := strings.Cut(msg[i+len(mid):], ":")
	keyOf, secret := secretFlags[name]
	if !secret {
		// A URL's password (--endpoint http://user:PASS@host) is not
		// quoted either (RED_TEAM 434).
		if v, err := strconv.Unquote(msg[len(prefix):i]); err == nil && shownURL(v) != v {
			return prefix + strconv.Quote(shownURL(v)) + msg[i:]
		}
		return msg
	}
	if v, err := strconv.Unquote(msg[len(prefix):i]); err == nil && !apikeys.ValidKey(keyOf(v)) {
		return msg
	}
	return prefix + "(not shown)" + msg[i:]
}

// acceptedValue says what a flag accepts when err is the flag package's
// refusal of a value its type cannot take ("invalid value "1" for flag
// -authorizer-ttl: parse error"), which names the flag but not the form;
// "" for any other error.
func acceptedValue(fs *flag.FlagSet, err error) string {
	const prefix = " for flag -"
	msg := err.Error()
	i := strings.Index(msg, prefix)
	if !strings.HasPrefix(msg, "invalid value ") || i < 0 {
		return ""
	}
	name, _, _ := strings.Cut(msg[i+len(prefix):], ":")
	f := fs.Lookup(name)
	if f == nil {
		return ""
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return ""
	}
	switch g.Get().(type) {
	case time.Duration:
		return "want a duration with its unit, such as 30s, 5m or 1h30m"
	case int, int64, uint, uint64:
		return "want a whole number in decimal digits, such as 100"
	case float64:
		return "want a number"
	case bool:
		return "want true or false"
	}
	return ""
}

// outOfRange says why a numeric flag refused a value written as the flag
// takes it (decimal digits, a duration with its unit) but beyond what its
// type holds ("99999999999999999999", "9999999999h"), which the flag
// package calls a parse error as it does a value that is no number: "out
// of range", naming the largest value the flag accepts (largestAccepted,
// else its type's), or for a value below the smallest that no numeric
// flag of idemkit takes one below zero; "" for any other error.
func outOfRange(fs *flag.FlagSet, err error) string {
	m := refusedValue.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	v, uerr := strconv.Unquote(m[1])
	f := fs.Lookup(m[2])
	if uerr != nil || f == nil {
		return ""
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return ""
	}
	largest := ""
	switch g.Get().(type) {
	case time.Duration:
		if !durationForm.MatchString(v) {
			return ""
		}
		largest = time.Duration(math.MaxInt64).String()
	case int:
		if !decimalForm.MatchString(v) {
			return ""
		}
		largest = strconv.Itoa(math.MaxInt)
	default:
		return ""
	}
	if strings.HasPrefix(v, "-") {
		return "out of range; want a value that is not negative"
	}
	if l, ok := largestAccepted[f.Name]; ok {
		largest = l
	}
	return "out of range; the largest accepted is " + largest
}

// refusedValue matches the flag package's refusal of a value its type
// cannot take: the value (quoted) and the flag's name.
var refusedValue = regexp.MustCompile(`^invalid value ("(?:[^"\\]|\\.)*") for flag -([^:]+): parse error$`)

// durationForm is time.ParseDuration's grammar ("1h30m", "-1.5s", "0"),
// decimalForm decimalInt's (digits, without a leading 0 or '+'): a value
// in that form which the flag refused is too large or too small for it.
var (
	durationForm = regexp.MustCompile(`^[-+]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)$`)
	decimalForm  = regexp.MustCompile(`^-?[1-9]\d*$`)
)

// largestAccepted names the largest value of the numeric flags that
// accept less than their type holds, as outOfRange says it.
var largestAccepted = map[string]string{
	"idempotency-wait": "1m", // IDEMPOTENCY_WAIT_MS: 0..60000
}

// usageError ends a command on a usage error found after its flags were
// parsed: one line, "idemkit COMMAND: " and what is wrong (naming the flag
// or argument), then usageHint. It returns 2, the exit status of a usage
// error.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "idemkit %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	usageHint(fs, stderr)
	return 2
}

// usageHint ends every usage error of a command: one line saying how to
// get its help.
func usageHint(fs *flag.FlagSet, stderr io.Writer) {
	fmt.Fprintf(stderr, "run 'idemkit %s -h' for help\n", fs.Name())
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

// entry is one command of a commandList: line is how the usage lists it
// (its name, the first word, then what it takes), summary what it does.
type entry struct {
	line, summary string
	run           command
}

// name is the word that selects the command.
func (e entry) name() string { return strings.Fields(e.line)[0] }

// commandList is `idemkit [GROUP] COMMAND`, written once: its usage and its
// dispatch both derive from it.
type commandList struct {
	// group is the group's name ("tables"); "" for idemkit itself.
	group string
	// about is the description under the usage line ("" for none).
	about    string
	entries  []entry
	examples []string
	// notes ends the usage, after a blank line ("" for none).
	notes string
}

// prog is the command line the list dispatches ("idemkit tables").
func (l commandList) prog() string { return strings.TrimSpace("idemkit " + l.group) }

// usage renders the list's usage: usage line, description, the commands,
// the examples, and where each command's own help is.
func (l commandList) usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s COMMAND [flags]\n\n", l.prog())
	if l.about != "" {
		fmt.Fprintf(&b, "%s\n\n", l.about)
	}
	w := 0
	for _, e := range l.entries {
		w = max(w, len(e.line))
	}
	b.WriteString("commands:\n")
	for _, e := range l.entries {
		fmt.Fprintf(&b, "  %-*s%s\n", w+3, e.line, e.summary)
	}
	if len(l.examples) == 1 {
		b.WriteString("\nexample:\n")
	} else {
		b.WriteString("\nexamples:\n")
	}
	for _, x := range l.examples {
		fmt.Fprintf(&b, "  %s\n", x)
	}
	if len(l.entries) == 1 {
		fmt.Fprintf(&b, "\nRun '%s %s -h' for its flags.\n", l.prog(), l.entries[0].name())
	} else {
		fmt.Fprintf(&b, "\nRun '%s COMMAND -h' (or '%s help COMMAND') for the flags and examples of a command.\n", l.prog(), l.prog())
	}
	if l.notes != "" {
		fmt.Fprintf(&b, "\n%s", l.notes)
	}
	return b.String()
}

// dispatch runs the command that args name. With no command it prints the
// usage on stderr and returns 2; an unknown command is a usage error (one
// line naming it and the commands of the list, then the hint; 2); with
// -h/--help/help it prints the usage on stdout and returns 0. "help COMMAND
// [SUBCOMMAND]" is "COMMAND [SUBCOMMAND] -h".
func (l commandList) dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
	case args[0] == "help" && len(args) > 1:
		return l.dispatch(ctx, append(slices.Clone(args[1:]), "-h"), stdout, stderr)
	case isHelp(args[0]):
		fmt.Fprint(stdout, l.usage())
		return 0
	default:
		for _, e := range l.entries {
			if e.name() == args[0] {
				return e.run(ctx, args[1:], stdout, stderr)
			}
		}
		fmt.Fprintf(stderr, "%s: unknown command %q: want %s\n", l.prog(), args[0], l.names())
		fmt.Fprintf(stderr, "run '%s -h' for help\n", l.prog())
		return 2
	}
	fmt.Fprint(stderr, l.usage())
	return 2
}

// names lists the words that select the list's commands, each once, in
// order: "create", "create or revoke", "list, show or resolve".
func (l commandList) names() string {
	var ns []string
	for _, e := range l.entries {
		if !slices.Contains(ns, e.name()) {
			ns = append(ns, e.name())
		}
	}
	if len(ns) < 2 {
		return strings.Join(ns, "")
	}
	return strings.Join(ns[:len(ns)-1], ", ") + " or " + ns[len(ns)-1]
}

// parseOneArg is parseFlags (flags and arguments interspersed) for a command
// that takes exactly one argument, named name in its usage line: any other
// count is a usage error that says so (exit 2).
func parseOneArg(fs *flag.FlagSet, name string, args []string, stdout, stderr io.Writer) (arg string, code int, done bool) {
	pos, code, done := parseFlags(fs, args, true, stdout, stderr)
	if done {
		return "", code, true
	}
	if len(pos) != 1 {
		return "", usageError(fs, stderr, "want exactly one %s, got %d arguments", name, len(pos)), true
	}
	return pos[0], 0, false
}

// settingError is how a command reports err, a configuration error that
// wraps one of sentinels (each a package's "invalid config" error):
// "invalid setting: " and what is wrong, without the chain of package
// names the error collected on its way up (devstack, host, idem, ...),
// which names code, not the setting the user gave.
func settingError(err error, sentinels ...error) string {
	msg, cut := err.Error(), -1
	for _, s := range sentinels {
		if i := strings.LastIndex(msg, s.Error()+": "); i >= 0 {
			cut = max(cut, i+len(s.Error())+2)
		}
	}
	if cut < 0 {
		return msg
	}
	return "invalid setting: " + msg[cut:]
}

// decimalInt is an int flag written in decimal digits alone, as strconv.Itoa
// writes the number ("100", "-3"), as a port is in an address (addrOK):
// the flag package's own int flag also takes "+5", "010" (8), "0x10" (16)
// and "1_000", which no one means by a count. A value it refuses is a
// usage error saying so (acceptedValue).
type decimalInt int

// intFlag defines a decimalInt flag on fs. Name the value in usage between
// backquotes (`N`), for the help line.
func intFlag(fs *flag.FlagSet, name string, value int, usage string) *int {
	p := new(int)
	*p = value
	fs.Var((*decimalInt)(p), name, usage)
	return p
}

func (d *decimalInt) String() string {
	if d == nil {
		return "0"
	}
	return strconv.Itoa(int(*d))
}

// errNotDecimal is decimalInt's refusal of a value, worded as the flag
// package's own ("parse error"), which acceptedValue follows with what the
// flag takes.
var errNotDecimal = errors.New("parse error")

func (d *decimalInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || s != strconv.Itoa(n) {
		return errNotDecimal
	}
	*d = decimalInt(n)
	return nil
}

func (d *decimalInt) Get() any { return int(*d) }
