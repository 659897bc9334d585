package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

const (
	sysIdemkit    = "idemkit"
	sysPowertools = "powertools"
)

// results holds the latencies of one engine: system/case -> samples (µs)
// and CPU (µs, the system's process, summed over the blocks).
type results struct {
	engine string
	us     map[string][]float64
	cpu    map[string]float64
}

func newResults(engine string) *results {
	return &results{engine: engine, us: map[string][]float64{}, cpu: map[string]float64{}}
}

func (r *results) add(sys, c string, us []float64, cpu float64) {
	r.us[sys+"/"+c] = append(r.us[sys+"/"+c], us...)
	r.cpu[sys+"/"+c] += cpu
}

func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func (r *results) p50(sys, c string) float64 { return pct(r.us[sys+"/"+c], 50) }

type splitResult struct {
	engine string
	n      int
	calls  map[string][]call
}

type cpuResult struct {
	engine               string
	first, replay, floor float64
	leanFirst, leanFloor float64 // the same with leanOptions
	profile              string
}

type report struct {
	header, footer string
	// loads holds the 1-minute load average over each pass of each engine
	// (pass/engine -> "start → end"; the latency pass's at the start of
	// every round and at its end), printed beside the pass's figures.
	loads   map[string]string
	latency []*results
	split   []*splitResult
	cpu     []cpuResult
	expr    []exprResult
	claim   []exprResult
	cost    []*costResult
}

// The passes whose load average the report prints beside their figures.
const (
	passCost    = "cost"
	passLatency = "latency"
	passSplit   = "split"
	passCPU     = "cpu"
	passExpr    = "expr"
	passClaim   = "claim"
)

func (rep *report) setLoad(pass, engine, load string) {
	if rep.loads == nil {
		rep.loads = map[string]string{}
	}
	rep.loads[pass+"/"+engine] = load
}

// eng names an engine with the load average over one of its passes.
func (rep *report) eng(pass, engine string) string {
	if l, ok := rep.loads[pass+"/"+engine]; ok {
		return engine + " (load " + l + ")"
	}
	return engine
}

type exprResult struct {
	engine string
	p50    map[string]float64
}

func fmtUS(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	s := fmt.Sprintf("%.0f", v)
	// thousands separators
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func cell(r *results, sys, c string) string {
	v := r.p50(sys, c)
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%s (%.2f×)", fmtUS(v), v/r.p50(sys, caseFloor))
}

func (rep *report) print(w io.Writer) {
	fmt.Fprintf(w, "Machine: %s\n\n", rep.header)
	for _, c := range rep.cost {
		c.print(w, rep.eng(passCost, c.engine))
	}
	if len(rep.latency) == 0 {
		fmt.Fprintf(w, "Machine: %s\n", rep.footer)
		return
	}
	tableHead(w, "Latency: p50 µs (× the system's own plain PutItem floor on the same engine)", "engine", "case", "idemkit p50 µs (× floor)", "Powertools p50 µs (× floor)", "idemkit p90 µs", "Powertools p90 µs")
	for _, r := range rep.latency {
		for _, c := range []struct{ c, name string }{
			{caseFloor, "PutItem floor"}, {caseFirst, "first execution"}, {caseReplay, "replay"},
			{caseLedger, "ledger first effect"}, {caseLedgerDup, "ledger duplicate"},
		} {
			ip, pp := cell(r, sysIdemkit, c.c), cell(r, sysPowertools, c.c)
			if c.c == caseFloor {
				ip, pp = fmtUS(r.p50(sysIdemkit, c.c))+" (Go SDK)", fmtUS(r.p50(sysPowertools, c.c))+" (JS SDK)"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", rep.eng(passLatency, r.engine), c.name, ip, pp,
				fmtUS(pct(r.us[sysIdemkit+"/"+c.c], 90)), fmtUS(pct(r.us[sysPowertools+"/"+c.c], 90)))
		}
	}
	fmt.Fprintln(w)

	tableHead(w, "Cost per request: DynamoDB calls, capacity units reported by the engine (ReturnConsumedCapacity TOTAL; — where it reports none) and computed from item sizes with DynamoDB's rules (writes: started KB of the larger of the item before and after, at least 1, plus each GSI copy; reads: started 4 KB, consistent)", "engine", "system", "case", "calls", "engine CU", "size CU (of which GSI)", "stored item bytes")
	for _, sp := range rep.split {
		for _, key := range sortedKeys(sp.calls) {
			cs := sp.calls[key]
			sys, c, _ := strings.Cut(key, "/")
			n := float64(sp.n)
			eng, engN, size, gsi, item := 0.0, 0, 0.0, 0.0, 0
			for _, x := range cs {
				if x.EngineCU >= 0 {
					eng += x.EngineCU
					engN++
				}
				size += x.SizeCU
				gsi += x.GSICU
				item = max(item, x.ItemBytes)
			}
			engS := "—"
			if engN > 0 {
				engS = fmt.Sprintf("%.2f", eng/n)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %.2f | %s | %.2f (%.2f) | %d |\n", rep.eng(passSplit, sp.engine), sys, c, float64(len(cs))/n, engS, size/n, gsi/n, item)
		}
	}
	fmt.Fprintln(w)

	tableHead(w, "Per-call split (mean over the split pass; engine ms is the time at the engine seen by the recording proxy)", "engine", "system", "case", "#", "call", "result", "bytes in", "bytes out", "engine ms", "size CU", "attributes", "condition")
	for _, sp := range rep.split {
		for _, key := range sortedKeys(sp.calls) {
			sys, c, _ := strings.Cut(key, "/")
			if c == caseFloor {
				continue
			}
			for i, g := range groupCalls(sp.calls[key], sp.n) {
				fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %d | %d | %.2f | %.2f | `%s` | `%s` |\n", rep.eng(passSplit, sp.engine), sys, c, i+1, g.Op,
					orOK(g.Failed), g.ReqBytes, g.RespBytes, float64(g.Engine.Microseconds())/1e3, g.SizeCU, oneLine(g.Attrs), oneLine(g.Condition))
			}
		}
	}
	fmt.Fprintln(w)

	if len(rep.cpu) > 0 {
		tableHead(w, "Client CPU per request (user+system of the Go process; moto is excluded because its serializing proxy runs in-process)", "engine", "idemkit first execution µs", "idemkit replay µs", "Go PutItem floor µs", "lean client: first execution / floor µs", "Powertools first execution µs (Node process)", "JS PutItem floor µs", "profile")
		for _, cp := range rep.cpu {
			var pf, pfl string = "—", "—"
			for _, r := range rep.latency {
				if r.engine == cp.engine {
					pf = fmtUS(r.cpu[sysPowertools+"/"+caseFirst] / float64(len(r.us[sysPowertools+"/"+caseFirst])))
					pfl = fmtUS(r.cpu[sysPowertools+"/"+caseFloor] / float64(len(r.us[sysPowertools+"/"+caseFloor])))
				}
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s / %s | %s | %s | %s |\n", rep.eng(passCPU, cp.engine), fmtUS(cp.first), fmtUS(cp.replay), fmtUS(cp.floor), fmtUS(cp.leanFirst), fmtUS(cp.leanFloor), pf, pfl, cp.profile)
		}
		fmt.Fprintln(w)
	}
	if len(rep.expr) > 0 {
		tableHead(w, "Write shapes: one Layer-1 completion of a fresh pending item, and one ledger fire mark of a freshly claimed effect record, written in each shape (Go SDK, p50 µs, × the plain PutItem floor measured alongside)", "engine", "write", "p50 µs", "× floor")
		for _, e := range rep.expr {
			floor := e.p50["plain PutItem floor"]
			names := []string{"plain PutItem floor", "claim PutItem (pending item, flat condition)"}
			for _, v := range exprVariants {
				names = append(names, v.name)
			}
			names = append(names, ledgerShapeNames...)
			for _, nm := range names {
				fmt.Fprintf(w, "| %s | %s | %s | %.2f× |\n", rep.eng(passExpr, e.engine), nm, fmtUS(e.p50[nm]), e.p50[nm]/floor)
			}
		}
		fmt.Fprintln(w)
	}
	if len(rep.claim) > 0 {
		tableHead(w, "Claim shapes: a Layer-1 claim and a ledger duplicate taken apart, every shape on a fresh key, interleaved request by request (Go SDK, p50 µs, × the plain PutItem floor measured alongside)", "engine", "write", "p50 µs", "× floor")
		for _, e := range rep.claim {
			floor := e.p50[shapeFloor]
			for _, nm := range claimShapeNames {
				fmt.Fprintf(w, "| %s | %s | %s | %.2f× |\n", rep.eng(passClaim, e.engine), nm, fmtUS(e.p50[nm]), e.p50[nm]/floor)
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Machine: %s\n", rep.footer)
}

func orOK(s string) string {
	if s == "" {
		return "ok"
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// groupCalls averages the calls of n sequential requests that made the same
// number of calls each, position by position; otherwise it lists the calls
// of the first request.
func groupCalls(cs []call, n int) []call {
	if n == 0 || len(cs)%n != 0 {
		if len(cs) > 8 {
			cs = cs[:8]
		}
		return cs
	}
	per := len(cs) / n
	out := make([]call, per)
	for i := 0; i < per; i++ {
		g := cs[i]
		var in, outB, item int
		var size float64
		var d int64
		for r := 0; r < n; r++ {
			x := cs[r*per+i]
			in += x.ReqBytes
			outB += x.RespBytes
			d += int64(x.Engine)
			size += x.SizeCU
			item += x.ItemBytes
		}
		g.ReqBytes, g.RespBytes, g.SizeCU, g.ItemBytes = in/n, outB/n, size/float64(n), item/n
		g.Engine = durationOf(d / int64(n))
		out[i] = g
	}
	return out
}

func durationOf(ns int64) time.Duration { return time.Duration(ns) }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// tableHead prints a Markdown table's title, a blank line, and its header
// row and separator row for cols.
func tableHead(w io.Writer, title string, cols ...string) {
	fmt.Fprintln(w, title)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| "+strings.Join(cols, " | ")+" |")
	fmt.Fprintln(w, strings.Repeat("| --- ", len(cols))+"|")
}
