// Command idemkit is the local and operator CLI of idemkit.
//
// PLACEHOLDER written by the client-conform helper because cmd/idemkit/main.go
// did not exist yet: it dispatches only `conform`. The kit's main.go (dev,
// tables, apikey, and conform via runConform) replaces this file whole.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: idemkit conform [flags] URL")
		return 2
	}
	switch args[0] {
	case "conform":
		return runConform(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "idemkit: unknown command %q\n", args[0])
		return 2
	}
}
