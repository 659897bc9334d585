// Command idemkit is idemkit's local and operator CLI.
//
//	idemkit dev [flags]                   run the whole stack on this machine
//	idemkit tables create --endpoint URL  create the tables of template.yaml (--only idempotency: that one alone)
//	idemkit apikey create --tenant T      mint an API key for a tenant
//	idemkit conform [flags] URL           check an API's Layer-1 behaviour
//	idemkit effects list|show|resolve     settle effects that escaped
//	idemkit version                       print the module version and VCS commit
//
// Run `idemkit COMMAND -h` for a command's flags and examples; help exits 0,
// a usage error exits 2.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: idemkit COMMAND [flags]

commands:
  dev             run the whole stack locally (emulator, tables, API, executor, auditor)
  tables create   create the DynamoDB tables of template.yaml at an endpoint
  apikey create   mint an API key for a tenant and store its hash
  conform         check the Layer-1 (Idempotency-Key) behaviour of an API
  effects         list, show and resolve effects that escaped (list --state escaped, show, resolve)
  version         print the module version and VCS commit of this binary

examples:
  idemkit dev
  idemkit tables create --endpoint http://127.0.0.1:8000
  idemkit conform --api-key KEY1 --api-key KEY2 http://127.0.0.1:3000
  idemkit effects list --state escaped --endpoint http://127.0.0.1:8000

Run 'idemkit COMMAND -h' for the flags and examples of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a command line (without the program name) and returns the
// exit status: 0 success, 1 failure, 2 usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "dev":
		return runDev(ctx, args[1:], stdout, stderr)
	case "tables":
		return runTables(ctx, args[1:], stdout, stderr)
	case "apikey":
		return runAPIKey(ctx, args[1:], stdout, stderr)
	case "version":
		return runVersion(args[1:], stdout, stderr)
	case "conform":
		return runConform(ctx, args[1:], stdout, stderr)
	case "effects":
		return runEffects(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "idemkit: unknown command %q\n\n%s", args[0], usage)
	return 2
}
