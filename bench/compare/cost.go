package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
)

// The cost pass: what one request of each case costs, at each response
// size, through the recording proxy (recorder.go) on fresh tables: DynamoDB
// calls, the capacity units the engine reports, and the units computed from
// item sizes under both readings of AWS's rule for a write ("existing": a
// write whose condition fails is billed for the existing item's size;
// "larger": every write for the larger of the item before and after), with
// the on-demand price per million requests at the rates below.

// On-demand request prices, US East (N. Virginia), standard table class, in
// effect since 1 November 2024: USD per million write request units and
// per million read request units (one RRU: a strongly consistent read of
// up to 4 KB).
const (
	priceWRU    = 0.625
	priceRRU    = 0.125
	priceSource = "on-demand, us-east-1, standard table class, since 2024-11-01: $0.625 per million write request units, $0.125 per million read request units"
)

// Cost cases (Layer 1 and the ledger).
const (
	costFirst     = "first execution"
	costReplay    = "replay"
	costInFlight  = "in-flight answer"
	costMismatch  = "mismatch"
	costLedger    = "ledger first effect"
	costLedgerDup = "ledger duplicate"
)

var costCases = []string{costFirst, costReplay, costInFlight, costMismatch, costLedger, costLedgerDup}

// costRow is one case at one size for one system.
type costRow struct {
	size    int
	sys     string
	cas     string
	outcome string // "" when the request was answered as expected
	calls   []call
}

type costResult struct {
	engine string
	rows   []costRow
}

// responseJSON returns an order-like JSON document of about n bytes (fixed
// seed): realistic for compression (deflate shrinks it to about a third).
func responseJSON(n int) string {
	var b strings.Builder
	b.Grow(n + 128)
	b.WriteString(`{"orderId":"ord_01JDXKQ7V3ZB8Y6R4N2M0P9Q8T","status":"confirmed","lines":[`)
	x := uint64(0x9e3779b97f4a7c15)
	for i := 0; b.Len() < n-40; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"SKU-%06d","qty":%d,"price":"%d.%02d","ref":"%016x"}`, x%1000000, x%9+1, x%500, x%100, x)
	}
	b.WriteString(`],"currency":"EUR"}`)
	return b.String()
}

// costSystem is idemkit for the cost pass: Layer 1 through the HTTP API
// adapter with the handler answering resp (never waiting for an in-flight
// winner: Wait < 0), and the ledger with its default MaxValueBytes.
type costSystem struct {
	h        idem.HTTPAPIHandler
	l        *ledger.Ledger
	resp     string
	holdKey  string
	entered  chan struct{}
	released chan struct{}
}

func newCostSystem(client *dynamodb.Client, idemTable, effectsTable string) (*costSystem, error) {
	g, l, err := newKit(client, idemTable, effectsTable, -1)
	if err != nil {
		return nil, err
	}
	s := &costSystem{l: l}
	s.h = g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if ev.Headers["idempotency-key"] == s.holdKey && s.entered != nil {
			close(s.entered)
			<-s.released
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"content-type": "application/json"}, Body: s.resp}, nil
	})
	return s, nil
}

// request sends one Layer-1 request and returns "" for want, else what came.
func (s *costSystem) request(key, body string, want int) string {
	gs := &goSystem{body: body}
	ctx, cancel := lambdaCtx(key)
	defer cancel()
	out, err := s.h(ctx, gs.event(key))
	if err != nil {
		return err.Error()
	}
	if out.StatusCode != want {
		return fmt.Sprintf("status %d (key %q): %.200s", out.StatusCode, key, out.Body)
	}
	return ""
}

// mismatchBody is the request body with one value changed: another payload
// under the same key.
func mismatchBody(body string) string {
	return strings.Replace(body, "wf_01HZXKQ7V3", "wf_01HZXKQ7V4", 1)
}

// costPass measures every case at every size for idemkit and Powertools.
func costPass(ctx context.Context, kind string, srv *emulator.Server, client *dynamodb.Client, pt *peer, sizes []int) (*costResult, error) {
	rec, err := startRecorder(srv.Endpoint, client)
	if err != nil {
		return nil, err
	}
	defer rec.close()
	ts, err := createTables(ctx, client, "cost")
	if err != nil {
		return nil, err
	}
	cs, err := newCostSystem(emulator.Client(rec.url), ts.idem, ts.effects)
	if err != nil {
		return nil, err
	}
	res := &costResult{engine: kind}
	body := requestBody()
	const discard = "discard"
	for _, size := range sizes {
		resp := responseJSON(size)
		cs.resp = resp
		key := func(c string) string {
			return fmt.Sprintf("cost-%s-%08d-%s-of-the-cost-pass", kind, size, c)
		}
		add := func(sys, c, outcome string) {
			fmt.Fprintf(os.Stderr, "%s: cost %s %s %s: %q\n", kind, fmtSize(size), sys, c, outcome)
			res.rows = append(res.rows, costRow{size: size, sys: sys, cas: c, outcome: outcome, calls: rec.take(sys + "/" + c)})
			rec.setTag(discard)
		}
		// idemkit, Layer 1.
		k := key("k")
		rec.setTag(sysIdemkit + "/" + costFirst)
		add(sysIdemkit, costFirst, cs.request(k, body, 201))
		rec.setTag(sysIdemkit + "/" + costReplay)
		add(sysIdemkit, costReplay, cs.request(k, body, 201))
		rec.setTag(sysIdemkit + "/" + costMismatch)
		add(sysIdemkit, costMismatch, cs.request(k, mismatchBody(body), 409))
		hk := key("held")
		cs.holdKey, cs.entered, cs.released = hk, make(chan struct{}), make(chan struct{})
		done := make(chan string, 1)
		go func() { done <- cs.request(hk, body, 201) }()
		select {
		case <-cs.entered:
		case out := <-done:
			return nil, fmt.Errorf("idemkit held request answered before its handler ran: %s", out)
		}
		rec.setTag(sysIdemkit + "/" + costInFlight)
		add(sysIdemkit, costInFlight, cs.request(hk, body, 409))
		close(cs.released)
		if out := <-done; out != "" {
			return nil, fmt.Errorf("idemkit held request: %s", out)
		}
		_ = rec.take(discard)
		cs.entered = nil
		// idemkit, the ledger: the effect's result is the response.
		id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: key("effect")})
		if err != nil {
			return nil, err
		}
		eff := ledger.Effect{Identity: id, RunID: fmt.Sprintf("acme/run-cost-%08d", size), NodeID: "charge"}
		fire := func(context.Context, ledger.Call) ([]byte, error) { return []byte(resp), nil }
		for _, c := range []string{costLedger, costLedgerDup} {
			rec.setTag(sysIdemkit + "/" + c)
			r, err := cs.l.Do(ctx, eff, fire)
			outcome := ""
			if err != nil {
				outcome = err.Error()
			} else if r.Replayed != (c == costLedgerDup) {
				outcome = fmt.Sprintf("replayed %t", r.Replayed)
			}
			add(sysIdemkit, c, outcome)
		}

		// Powertools, Layer 1 only.
		if pt == nil {
			continue
		}
		if err := pt.initCost(rec.url, ts.peer, ts.floor, body, resp); err != nil {
			return nil, err
		}
		for _, c := range []struct{ c, body, want string }{
			{costFirst, body, "ok"}, {costReplay, body, "ok"}, {costMismatch, mismatchBody(body), "IdempotencyValidationError"},
		} {
			rec.setTag(sysPowertools + "/" + c.c)
			got, err := pt.one(k, c.body)
			if err != nil {
				return nil, err
			}
			add(sysPowertools, c.c, unexpected(got, c.want))
		}
		if err := pt.hold(hk); err != nil {
			return nil, err
		}
		rec.setTag(sysPowertools + "/" + costInFlight)
		got, err := pt.one(hk, body)
		if err != nil {
			return nil, err
		}
		add(sysPowertools, costInFlight, unexpected(got, "IdempotencyAlreadyInProgressError"))
		if _, err := pt.release(); err != nil {
			return nil, err
		}
		_ = rec.take(discard)
	}
	return res, nil
}

func unexpected(got, want string) string {
	if got == want {
		return ""
	}
	return got
}

// units sums a case's calls: engine-reported write and read units (-1 when
// the engine reported none for any call of that kind), computed write units
// under both readings, computed read units, and the largest item.
type units struct {
	engineW, engineR       float64
	wExisting, wLarger, rd float64
	item                   int
	ops                    []string
}

func sumCalls(cs []call) units {
	u := units{engineW: -1, engineR: -1}
	for _, c := range cs {
		u.ops = append(u.ops, c.Op)
		u.item = max(u.item, c.ItemBytes)
		if isWrite(c.Op) || c.Op == "TransactWriteItems" {
			u.wExisting += c.ExistingCU
			u.wLarger += c.SizeCU
			if c.EngineCU >= 0 {
				u.engineW = math.Max(u.engineW, 0) + c.EngineCU
			}
			continue
		}
		u.rd += c.SizeCU
		if c.EngineCU >= 0 {
			u.engineR = math.Max(u.engineR, 0) + c.EngineCU
		}
	}
	return u
}

func price(w, r float64) float64 { return w*priceWRU + r*priceRRU }

func fmtCU(v float64) string {
	if v < 0 {
		return "—"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func fmtSize(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// opsSummary is "PutItem, BatchGetItem" style, counts for repeats.
func opsSummary(ops []string) string {
	n := map[string]int{}
	var order []string
	for _, o := range ops {
		if n[o] == 0 {
			order = append(order, o)
		}
		n[o]++
	}
	parts := make([]string, 0, len(order))
	for _, o := range order {
		if n[o] > 1 {
			parts = append(parts, fmt.Sprintf("%d× %s", n[o], o))
		} else {
			parts = append(parts, o)
		}
	}
	return strings.Join(parts, ", ")
}

// print writes the table; engine names the engine as the title shows it
// (with the pass's load average).
func (r *costResult) print(w io.Writer, engine string) {
	tableHead(w, fmt.Sprintf("Cost per request on %s, by response size (an order-like JSON document; the ledger records it as the effect's value up to its default 64 KiB cap): DynamoDB calls; write units (WCU) and strongly consistent read units (RCU) as the engine reports them (— where it reports none) and as computed from item sizes (\"one write capacity unit represents one write per second for an item up to 1 KB\", \"one read capacity unit represents one strongly consistent read per second ... for an item up to 4 KB\"), a write billed for the existing item's size when its condition fails (existing) or for the larger of the existing and the new item (larger); the largest item touched; USD per million requests (%s)", engine, priceSource),
		"size", "case", "system", "calls", "engine WCU / RCU", "WCU existing / larger", "RCU", "largest item (bytes)", "USD per million, existing / larger")
	rows := append([]costRow(nil), r.rows...)
	idx := map[string]int{}
	for i, c := range costCases {
		idx[c] = i
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].size != rows[j].size {
			return rows[i].size < rows[j].size
		}
		return idx[rows[i].cas] < idx[rows[j].cas]
	})
	for _, row := range rows {
		u := sumCalls(row.calls)
		calls := fmt.Sprintf("%d (%s)", len(row.calls), opsSummary(u.ops))
		if row.outcome != "" {
			calls += "; answered: " + row.outcome
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s / %s | %s / %s | %s | %s | %.3f / %.3f |\n",
			fmtSize(row.size), row.cas, row.sys, calls, fmtCU(u.engineW), fmtCU(u.engineR),
			fmtCU(u.wExisting), fmtCU(u.wLarger), fmtCU(u.rd), fmtUS(float64(u.item)),
			price(u.wExisting, u.rd), price(u.wLarger, u.rd))
	}
	fmt.Fprintln(w)
}

// parseSizes reads a comma-separated list of byte counts ("" for none).
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad size %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}
