package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/idemkit/idemkit/internal/conform"
)

const conformUsageLine = `idemkit conform [--api-key KEY]... [--route 'POST /runs'] [--body JSON] [--profile openwop|erp] URL
       [--slow-body JSON] [--invalid-body JSON] [--get PATH] [--timeout D] [--stagger D]`

const conformAbout = `Checks the Layer-1 (Idempotency-Key) behaviour of the API at URL from the
outside, one line per scenario, then "N passed, M failed". The exit status is
0 when nothing failed, 1 when a scenario failed, 2 on a usage error. At
least one --api-key is required; two (two tenants) enable the
tenant-isolation scenario. The defaults fit 'idemkit dev'.

examples:
  idemkit conform --api-key KEY1 --api-key KEY2 http://127.0.0.1:3000
  idemkit conform --api-key KEY --route 'POST /orders' --body '{"sku":"A-17"}' https://api.example.com
`

// runConform implements `idemkit conform`: args are the arguments after
// "conform". It returns the process exit status.
func runConform(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conform", flag.ContinueOnError)
	setUsage(fs, conformUsageLine, conformAbout)
	var (
		cfg     conform.Config
		profile string
	)
	fs.Func("api-key", "API key sent as 'Authorization: Bearer KEY'; repeat for a second tenant (at most two)", func(s string) error {
		if strings.TrimSpace(s) == "" {
			return errors.New("empty API key")
		}
		cfg.APIKeys = append(cfg.APIKeys, s)
		return nil
	})
	fs.StringVar(&cfg.Route, "route", conform.DefaultRoute, "the mutating operation checked, 'METHOD /path'")
	fs.StringVar(&cfg.Body, "body", conform.DefaultBody, "a valid JSON object body for the route")
	fs.StringVar(&profile, "profile", string(conform.ProfileOpenWOP), "rule set: openwop (the OpenWOP default policy) or erp (the ERP policy)")
	fs.StringVar(&cfg.SlowBody, "slow-body", "", "a valid body slow enough to overlap a duplicate (in-flight scenario); default: the conformance-delay fixture with the default body, else --body")
	fs.StringVar(&cfg.InvalidBody, "invalid-body", "", "a body rejected with 400 validation_error; default: "+conform.DefaultInvalidBody+" with the default body, else {}")
	fs.StringVar(&cfg.GetPath, "get", "", "GET path of a created resource, {id} standing for its runId/id; default: the route's path + /{id}")
	fs.DurationVar(&cfg.Timeout, "timeout", conform.DefaultTimeout, "bound on each request, and on a duplicate's wait")
	fs.DurationVar(&cfg.Stagger, "stagger", conform.DefaultStagger, "how long the slow request runs before its duplicates are sent")

	// Flags may come before or after the URL.
	pos, code, done := parseFlags(fs, args, true, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "idemkit conform: want exactly one URL")
		fs.Usage()
		return 2
	}
	cfg.BaseURL = pos[0]
	cfg.Profile = conform.Profile(profile)
	if cfg.Body == conform.DefaultBody {
		cfg.Body = "" // keep the fixture defaults for the slow and invalid bodies
	}
	if cfg.Timeout <= 0 || cfg.Stagger < 0 {
		fmt.Fprintln(stderr, "idemkit conform: --timeout must be positive and --stagger not negative")
		return 2
	}
	if len(cfg.APIKeys) == 0 {
		// Without a key every scenario would only see 401 unauthenticated.
		fmt.Fprintln(stderr, "idemkit conform: --api-key KEY is required (the API's bearer key; 'idemkit dev' prints two)")
		fs.Usage()
		return 2
	}

	results, err := conform.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "idemkit conform: %v\n", err)
		return 2
	}
	_, failed := conform.Write(stdout, results)
	if failed > 0 {
		return 1
	}
	return 0
}
