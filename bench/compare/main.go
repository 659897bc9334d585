// Command compare is the side-by-side benchmark behind `make bench-compare`
// and docs/PERFORMANCE.md.
//
// For each engine (emulators started with internal/emulator) it runs, on the
// same engine process:
//
//   - idemkit Layer 1 through the HTTP API (payload 2.0) adapter, in a
//     Lambda-shaped context, with the DynamoDB store: first execution (new
//     key) and replay (the same key and body again), an ~870-byte JSON body
//     and a small JSON response;
//   - Powertools for AWS Lambda (TypeScript) makeIdempotent on the same
//     request shape (bench/powertools, pinned with a lockfile);
//   - the ledger's Do: first effect and suppressed duplicate;
//   - a plain PutItem of a small item from each system's own SDK: the floor
//     each system's figures are divided by.
//
// Blocks of sequential requests are interleaved ABBA across rounds (A =
// idemkit, B = Powertools) after a warm-up; each latency is measured inside
// the system's own process around the call. Then a split pass sends a few
// requests of every case through a recording proxy (per call: operation,
// bytes in and out, attributes, condition, capacity units reported by the
// engine and computed from item sizes), and a CPU pass measures the Go
// client's CPU per first execution (rusage; a CPU profile is written).
// Absolute times vary with the machine; the ratios and the ordering are the
// result.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/tables"
)

type options struct {
	engines   []string
	n, rounds int
	warmup    int
	split     int
	cpuN      int
	exprN     int
	claimN    int
	outDir    string
	tools     string
	peerDir   string
	costSizes []int
	costOnly  bool
}

func main() {
	var o options
	var engines string
	flag.StringVar(&engines, "engines", "moto,dynalite,dynamodb-local", "comma-separated engines: "+strings.Join(engineKinds(), ", "))
	flag.IntVar(&o.n, "n", 2000, "sequential requests per block")
	flag.IntVar(&o.rounds, "rounds", 3, "ABBA rounds")
	flag.IntVar(&o.warmup, "warmup", 200, "warm-up requests per case and system")
	flag.IntVar(&o.split, "split", 20, "requests per case in the split/capacity pass")
	flag.IntVar(&o.cpuN, "cpu", 1000, "first executions in the CPU pass")
	flag.IntVar(&o.exprN, "expr", 200, "writes per shape and round in the write-shape pass (0: skip)")
	flag.IntVar(&o.claimN, "claim", 200, "writes per shape and round in the claim-shape pass (0: skip)")
	flag.StringVar(&o.outDir, "out", filepath.Join(os.TempDir(), "idemkit-bench"), "directory for CPU profiles")
	flag.StringVar(&o.tools, "tools", "tools", "directory pinning dynalite and DynamoDB Local")
	flag.StringVar(&o.peerDir, "powertools", "bench/powertools", "directory of the Powertools runner")
	costSizes := flag.String("cost", "200,4096,40960,358400,2097152", "response sizes (bytes) of the cost pass, comma-separated (\"\": skip it)")
	flag.BoolVar(&o.costOnly, "cost-only", false, "run the cost pass only (no latency, split, CPU or shape passes)")
	flag.Parse()
	var err error
	if o.costSizes, err = parseSizes(*costSizes); err != nil {
		fmt.Fprintln(os.Stderr, "bench-compare: -cost:", err)
		os.Exit(2)
	}
	o.engines = strings.Split(engines, ",")
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-compare:", err)
		os.Exit(1)
	}
}

func engineKinds() []string { return emulator.Kinds }

// load1 returns the 1-minute load average ("?" where /proc has none).
func load1() string {
	if f := strings.Fields(loadavg()); len(f) > 0 && f[0] != "unknown" {
		return f[0]
	}
	return "?"
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func run(o options) error {
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return err
	}
	rep := &report{}
	if o.costOnly {
		o.rounds, o.n, o.warmup = 0, 0, 0
	}
	rep.header = fmt.Sprintf("%d CPUs (GOMAXPROCS %d), %s/%s, %s; load average at start %s; %d rounds × %d requests per block, ABBA, warm-up %d",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), loadavg(), o.rounds, o.n, o.warmup)
	for _, kind := range o.engines {
		if err := benchEngine(o, kind, rep); err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
	}
	rep.footer = "load average at end " + loadavg()
	rep.print(os.Stdout)
	return nil
}

func createKeyTable(ctx context.Context, c *dynamodb.Client, name, key string) error {
	return createStreamTable(ctx, c, name, key, "")
}

// createStreamTable creates a table keyed by key with a stream of the given
// view type ("": none).
func createStreamTable(ctx context.Context, c *dynamodb.Client, name, key string, view types.StreamViewType) error {
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(key), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(key), KeyType: types.KeyTypeHash}},
	}
	if view != "" {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: view}
	}
	_, err := c.CreateTable(ctx, in)
	if err != nil {
		return err
	}
	_, err = tables.WaitActive(ctx, c, name)
	return err
}

// tableSet names the tables of one pass (fresh tables per pass keep the
// split pass's reads free of earlier items).
type tableSet struct{ idem, effects, floor, peer string }

func createTables(ctx context.Context, c *dynamodb.Client, suffix string) (tableSet, error) {
	ts := tableSet{idem: "idem" + suffix, effects: "effects" + suffix, floor: "floor" + suffix, peer: "powertools" + suffix}
	if err := tables.Create(ctx, c, "IdempotencyTable", ts.idem); err != nil {
		return ts, err
	}
	if err := tables.Create(ctx, c, "EffectsTable", ts.effects); err != nil {
		return ts, err
	}
	if err := createKeyTable(ctx, c, ts.floor, "pk"); err != nil {
		return ts, err
	}
	return ts, createKeyTable(ctx, c, ts.peer, "id")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchEngine(o options, kind string, rep *report) error {
	ctx := context.Background()
	srv, err := emulator.Start(ctx, kind, emulator.Options{ToolsDir: o.tools})
	if err != nil {
		return err
	}
	defer srv.Stop()
	client := emulator.Client(srv.Endpoint)
	ts, err := createTables(ctx, client, "")
	if err != nil {
		return err
	}
	body := requestBody()
	gs, err := newGoSystem(client, ts.idem, ts.effects, ts.floor, body)
	if err != nil {
		return err
	}
	pt, err := startPeer(o.peerDir)
	if err != nil {
		return err
	}
	defer pt.stop()
	if len(o.costSizes) > 0 {
		fmt.Fprintf(os.Stderr, "%s: cost pass (load average %s)\n", kind, loadavg())
		l0 := load1()
		cr, err := costPass(ctx, kind, srv, client, pt, o.costSizes)
		if err != nil {
			return fmt.Errorf("cost pass: %w", err)
		}
		rep.setLoad(passCost, kind, l0+" → "+load1())
		rep.cost = append(rep.cost, cr)
	}
	if o.costOnly {
		return nil
	}
	if err := pt.init(srv.Endpoint, ts.peer, ts.floor, body); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s: body %d bytes; warming up\n", kind, len(body))

	goCases := []string{caseFloor, caseFirst, caseReplay, caseLedger, caseLedgerDup}
	ptCases := []string{caseFloor, caseFirst, caseReplay}
	res := newResults(kind)
	block := func(sys string, r int, n int, record bool) error {
		prefix := fmt.Sprintf("bench-%s-%s-r%02d-", kind, sys, r)
		if sys == sysIdemkit {
			for _, c := range goCases {
				c0 := cpuTime()
				us, err := gs.run(c, n, prefix+c[:1]+"-")
				if err != nil {
					return err
				}
				if record {
					res.add(sys, c, us, float64((cpuTime() - c0).Microseconds()))
				}
			}
			return nil
		}
		for _, c := range ptCases {
			us, cpu, err := pt.run(c, n, prefix+c[:1]+"-")
			if err != nil {
				return err
			}
			if record {
				res.add(sys, c, us, cpu)
			}
		}
		return nil
	}
	if err := block(sysIdemkit, 99, o.warmup, false); err != nil {
		return err
	}
	if err := block(sysPowertools, 99, o.warmup, false); err != nil {
		return err
	}
	var rounds []string
	for r := 0; r < o.rounds; r++ {
		rounds = append(rounds, load1())
		order := []string{sysIdemkit, sysPowertools}
		if r%2 == 1 {
			order = []string{sysPowertools, sysIdemkit}
		}
		for _, sys := range order {
			fmt.Fprintf(os.Stderr, "%s: round %d %s\n", kind, r+1, sys)
			if err := block(sys, r, o.n, true); err != nil {
				return err
			}
		}
	}
	rep.latency = append(rep.latency, res)
	rep.setLoad(passLatency, kind, strings.Join(append(rounds, load1()), " → "))

	// Split/capacity pass through the recording proxy, on fresh tables.
	rec, err := startRecorder(srv.Endpoint, client)
	if err != nil {
		return err
	}
	defer rec.close()
	ts2, err := createTables(ctx, client, "split")
	if err != nil {
		return err
	}
	gs2, err := newGoSystem(emulator.Client(rec.url), ts2.idem, ts2.effects, ts2.floor, body)
	if err != nil {
		return err
	}
	if err := pt.init(rec.url, ts2.peer, ts2.floor, body); err != nil {
		return err
	}
	l0 := load1()
	sp := &splitResult{engine: kind, calls: map[string][]call{}}
	for _, c := range goCases {
		rec.setTag(sysIdemkit + "/" + c)
		if _, err := gs2.run(c, o.split, "bench-split-idemkit-"+c[:1]+"-"); err != nil {
			return err
		}
		sp.calls[sysIdemkit+"/"+c] = rec.take(sysIdemkit + "/" + c)
	}
	for _, c := range ptCases {
		rec.setTag(sysPowertools + "/" + c)
		if _, _, err := pt.run(c, o.split, "bench-split-powertools-"+c[:1]+"-"); err != nil {
			return err
		}
		sp.calls[sysPowertools+"/"+c] = rec.take(sysPowertools + "/" + c)
	}
	sp.n = o.split
	rep.split = append(rep.split, sp)
	rep.setLoad(passSplit, kind, l0+" → "+load1())

	// CPU pass: Go client CPU per first execution and per floor PutItem.
	// The serializing proxy of an engine reached through it (moto) runs
	// inside this process (internal/emulator), so its CPU would be
	// counted: measured on the other engines only.
	if eng, _ := emulator.Lookup(kind); !eng.Caps.Serialize {
		l0 := load1()
		cp := cpuResult{engine: kind}
		prof := filepath.Join(o.outDir, kind+"-first-execution.pprof")
		f, err := os.Create(prof)
		if err != nil {
			return err
		}
		runtime.GC()
		c0 := cpuTime()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		if _, err := gs.run(caseFirst, o.cpuN, fmt.Sprintf("bench-%s-cpu-first-", kind)); err != nil {
			return err
		}
		pprof.StopCPUProfile()
		f.Close()
		cp.first = float64((cpuTime() - c0).Microseconds()) / float64(o.cpuN)
		c0 = cpuTime()
		if _, err := gs.run(caseFloor, o.cpuN, fmt.Sprintf("bench-%s-cpu-floor-", kind)); err != nil {
			return err
		}
		cp.floor = float64((cpuTime() - c0).Microseconds()) / float64(o.cpuN)
		rf, err := os.Create(filepath.Join(o.outDir, kind+"-replay.pprof"))
		if err != nil {
			return err
		}
		c0 = cpuTime()
		if err := pprof.StartCPUProfile(rf); err != nil {
			return err
		}
		if _, err := gs.run(caseReplay, o.cpuN, ""); err != nil {
			return err
		}
		pprof.StopCPUProfile()
		rf.Close()
		cp.replay = float64((cpuTime() - c0).Microseconds()) / float64(o.cpuN)
		cp.profile = prof
		// The same first executions and floor writes through a client
		// with leanOptions, on the same tables.
		lean, err := newGoSystem(emulator.Client(srv.Endpoint, leanOptions(srv.Endpoint)), ts.idem, ts.effects, ts.floor, body)
		if err != nil {
			return err
		}
		if _, err := lean.run(caseFloor, 100, fmt.Sprintf("bench-%s-lean-warm-", kind)); err != nil {
			return err
		}
		runtime.GC()
		c0 = cpuTime()
		if _, err := lean.run(caseFirst, o.cpuN, fmt.Sprintf("bench-%s-lean-first-", kind)); err != nil {
			return err
		}
		cp.leanFirst = float64((cpuTime() - c0).Microseconds()) / float64(o.cpuN)
		c0 = cpuTime()
		if _, err := lean.run(caseFloor, o.cpuN, fmt.Sprintf("bench-%s-lean-floor-", kind)); err != nil {
			return err
		}
		cp.leanFloor = float64((cpuTime() - c0).Microseconds()) / float64(o.cpuN)
		rep.cpu = append(rep.cpu, cp)
		rep.setLoad(passCPU, kind, l0+" → "+load1())
	}

	// Write-shape pass: one completion written in several shapes.
	if o.exprN > 0 {
		l0 := load1()
		ts3, err := createTables(ctx, client, "expr")
		if err != nil {
			return err
		}
		p50, err := exprCost(ctx, client, ts3.idem, ts3.floor, o.exprN, o.rounds)
		if err != nil {
			return err
		}
		lp50, err := ledgerShapeCost(ctx, client, ts3.effects, o.exprN, o.rounds)
		if err != nil {
			return err
		}
		for k, v := range lp50 {
			p50[k] = v
		}
		rep.expr = append(rep.expr, exprResult{engine: kind, p50: p50})
		rep.setLoad(passExpr, kind, l0+" → "+load1())
	}

	// Claim-shape pass: a Layer-1 claim and a ledger duplicate taken apart
	// (stream and TTL, condition, attribute count, bytes, returned item).
	if o.claimN > 0 {
		l0 := load1()
		ts4, err := createTables(ctx, client, "claim")
		if err != nil {
			return err
		}
		ct := claimTables{idem: ts4.idem, effects: ts4.effects, plain: "plainclaim", floor: ts4.floor, streamOnly: "streamclaim", ttlOnly: "ttlclaim",
			streamNew: "streamnewclaim", streamKeys: "streamkeysclaim"}
		for t, view := range map[string]types.StreamViewType{ct.plain: "", ct.ttlOnly: "", ct.streamOnly: types.StreamViewTypeNewAndOldImages,
			ct.streamNew: types.StreamViewTypeNewImage, ct.streamKeys: types.StreamViewTypeKeysOnly} {
			if err := createStreamTable(ctx, client, t, "pk", view); err != nil {
				return err
			}
		}
		// Where the engine has no TTL (dynalite) the TTL-only table is a
		// plain one; the row says so by matching the plain table's.
		if _, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(ct.ttlOnly),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expiresAt"), Enabled: aws.Bool(true)}}); err != nil {
			fmt.Fprintf(os.Stderr, "%s: no TTL on the TTL-only table: %v\n", kind, err)
		}
		gs4, err := newGoSystem(client, ts4.idem, ts4.effects, ts4.floor, body)
		if err != nil {
			return err
		}
		p50, err := claimShapeCost(ctx, client, ct, gs4, o.claimN, o.rounds)
		if err != nil {
			return err
		}
		rep.claim = append(rep.claim, exprResult{engine: kind, p50: p50})
		rep.setLoad(passClaim, kind, l0+" → "+load1())
	}
	return nil
}
