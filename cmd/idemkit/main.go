// Command idemkit is idemkit's local and operator CLI: `idemkit dev` runs
// the whole stack on this machine (functions/devstack), and the operator
// commands create tables, compare deployed tables with template.yaml
// (doctor), mint API keys, check an API's Layer-1 behaviour and settle
// effects that escaped.
//
// Run `idemkit help` for the commands (listed once, in commands) and
// `idemkit COMMAND -h` for a command's flags and examples. Every command
// exits 0 on success, 1 on a failure at run time and 2 on a usage error
// (exitRule).
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// commands are idemkit's commands, the one place they are listed: `idemkit
// help` and the dispatch both read this list. A group's commands are listed
// on its line ("effects") or one line each ("apikey create", "apikey
// revoke", dispatching alike), as docs/CLI.md's table lists them.
var commands = commandList{
	entries: []entry{
		{"dev", "run the whole stack locally (emulator, tables, API, executor, auditor)", runDev},
		{"tables create", "create the DynamoDB tables of template.yaml at an endpoint", runTables},
		{"doctor", "compare deployed tables with template.yaml (status, keys, indexes, stream, a global table's replicas, TTL, PITR, deletion protection) and say what differs", runDoctor},
		{"apikey create", "mint an API key for a tenant and store its hash", runAPIKey},
		{"apikey revoke", "revoke an API key (by the key or its stored hash): delete its item", runAPIKey},
		{"webhook secret rotate", "give a tenant a new webhook signing secret (printed once)", runWebhook},
		{"webhook secret remove", "remove a tenant's webhook signing secrets: its deliveries are unsigned again", runWebhook},
		{"conform", "check the Layer-1 (Idempotency-Key) behaviour of an API", runConform},
		{"effects", "list, show and resolve effects that escaped (list --state escaped, show, resolve)", runEffects},
		{"version", "print the module version and VCS commit of this binary", func(_ context.Context, args []string, stdout, stderr io.Writer) int {
			return runVersion(args, stdout, stderr)
		}},
	},
	examples: []string{
		"idemkit dev",
		"idemkit tables create --endpoint http://127.0.0.1:8000",
		"idemkit doctor --table IdempotencyTable=orders-idempotency",
		"idemkit conform --api-key KEY1 --api-key KEY2 http://127.0.0.1:3000",
		"idemkit effects list --state escaped --endpoint http://127.0.0.1:8000",
	},
	notes: exitRule,
}

func main() {
	ctx, stop := interrupts(len(os.Args) > 1 && os.Args[1] == "dev")
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// interrupts returns the context a command runs under: the first SIGINT
// (Ctrl-C) or SIGTERM ends it, and the second closes its
// secondInterrupt channel, on which `idemkit dev` stops at once instead of
// waiting for the requests in flight. With hangUp (`idemkit dev`) SIGHUP,
// which a closed terminal sends, counts as SIGTERM does (RED_TEAM 508),
// unless it was ignored when the process started: signal.Notify would
// undo that, and `nohup idemkit dev &` is meant to outlive its terminal.
// stop unregisters the signals.
func interrupts(hangUp bool) (ctx context.Context, stop func()) {
	sig := make(chan os.Signal, 2)
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if hangUp && !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	signal.Notify(sig, sigs...)
	ctx, cancel := context.WithCancel(context.Background())
	again := make(chan struct{})
	go func() {
		if _, ok := <-sig; !ok {
			return
		}
		cancel()
		if _, ok := <-sig; ok {
			close(again)
		}
	}()
	return context.WithValue(ctx, secondInterruptKey{}, (<-chan struct{})(again)), func() {
		signal.Stop(sig)
		cancel()
	}
}

type secondInterruptKey struct{}

// secondInterrupt is closed by the second SIGINT or SIGTERM of the
// process (interrupts); nil, which never closes, when ctx has none.
func secondInterrupt(ctx context.Context) <-chan struct{} {
	c, _ := ctx.Value(secondInterruptKey{}).(<-chan struct{})
	return c
}

// run dispatches a command line (without the program name) and returns the
// exit status (exitRule): 0 success, 1 a failure at run time, 2 a usage
// error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		args = []string{"version"} // the spelling most tools take
	}
	return commands.dispatch(ctx, args, stdout, stderr)
}
