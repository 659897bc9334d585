package webhook

import (
	"encoding/json"
	"fmt"

	"github.com/idemkit/idemkit/internal/apierr"
)

// The built-in workflows with a node graph: the executor walks their
// nodes (a node may execute more than once in a run, each execution with
// its own ordinal) and records node.started / node.completed / node.failed
// in the run's node log.
const (
	// WorkflowReplayOrdinalLoop is start -> effect -> wait -> effect:
	// effect (a side-effecting node) executes twice, bounded by
	// MaxLoopback 2; wait holds inputs.delayMs (default 3000).
	WorkflowReplayOrdinalLoop = "conformance-replay-ordinal-loop"
	// WorkflowReplaySideEffect is wait -> effect: a hold of inputs.delayMs
	// (default 30000), then one side-effecting node.
	WorkflowReplaySideEffect = "conformance-replay-side-effect"
)

// Node type ids of the graph workflows.
const (
	TypeNoop = "core.noop"
	// TypeSideEffect is the conformance-reserved side-effecting type: one
	// POST through the ledger (Webhook.DeliverNode) to inputs.url, or to
	// the host's own fixture destination when absent.
	TypeSideEffect = "core.conformance.side-effect"
	// TypeDelay and TypeHold are pure waits of inputs.delayMs: they
	// re-execute live in a replay.
	TypeDelay = "core.delay"
	TypeHold  = "core.conformance.hold"
)

// maxGraphDelayMs bounds a graph workflow's inputs.delayMs.
const maxGraphDelayMs = 60000

// Node is one node of a graph workflow.
type Node struct {
	ID     string
	TypeID string
}

// SideEffecting reports whether the node performs an external side
// effect: such a node is resolved from the source's record in a replay,
// never performed. The classification is by type, before execution.
func (n Node) SideEffecting() bool { return n.TypeID == TypeSideEffect }

// Graph is a workflow's nodes and edges. Execution starts at Nodes[0] and
// follows each node's one outgoing edge; a node already executed
// MaxLoopback times ends the walk (the run completes), so a loop back over
// an edge is bounded.
type Graph struct {
	Nodes []Node
	// Next maps a node id to the node its outgoing edge leads to.
	Next map[string]string
	// MaxLoopback bounds the executions of one node in one run.
	MaxLoopback int
	// DefaultDelayMs is the wait nodes' hold when inputs.delayMs is absent.
	DefaultDelayMs int
}

// Node returns the node with id.
func (g Graph) Node(id string) (Node, bool) {
	for _, n := range g.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return Node{}, false
}

var graphs = map[string]Graph{
	WorkflowReplayOrdinalLoop: {
		Nodes:       []Node{{"start", TypeNoop}, {"effect", TypeSideEffect}, {"wait", TypeDelay}},
		Next:        map[string]string{"start": "effect", "effect": "wait", "wait": "effect"},
		MaxLoopback: 2, DefaultDelayMs: 3000,
	},
	WorkflowReplaySideEffect: {
		Nodes:       []Node{{"wait", TypeHold}, {"effect", TypeSideEffect}},
		Next:        map[string]string{"wait": "effect"},
		MaxLoopback: 1, DefaultDelayMs: 30000,
	},
}

// LoopHead returns the node the walk's loop starts at: the first node the
// walk (Nodes[0], then each node's outgoing edge) reaches a second time;
// "" for a graph without a loop. Each execution of it is one iteration of
// the loop, the count configurable.run.maxLoopIterations bounds.
func (g Graph) LoopHead() string {
	seen := map[string]bool{}
	for cur := g.Nodes[0].ID; cur != ""; cur = g.Next[cur] {
		if seen[cur] {
			return cur
		}
		seen[cur] = true
	}
	return ""
}

// GraphOf returns the node graph of a built-in workflow (false for a
// workflow without one).
func GraphOf(workflowID string) (Graph, bool) {
	g, ok := graphs[workflowID]
	return g, ok
}

// GraphInputs are a graph workflow's inputs: the wait nodes' delayMs and
// the side-effect node's optional destination url (the host's fixture
// destination when "").
type GraphInputs struct {
	DelayMs int
	URL     string
}

// ReadGraphInputs reads a graph workflow's inputs from a run's stored
// inputs (validated by ParseCreate).
func ReadGraphInputs(g Graph, inputs json.RawMessage) GraphInputs {
	in := GraphInputs{DelayMs: g.DefaultDelayMs}
	// By exact member names, as ParseCreate read them (RED_TEAM 443).
	raw, err := inputMembers(inputs)
	if err != nil {
		return in
	}
	var d *int
	var u string
	if json.Unmarshal(orNull(raw["delayMs"]), &d) != nil || json.Unmarshal(orNull(raw["url"]), &u) != nil {
		return in
	}
	if d != nil && *d >= 0 && *d <= maxGraphDelayMs {
		in.DelayMs = *d
	}
	in.URL = u
	return in
}

// orNull is v, or the JSON null when v is absent.
func orNull(v json.RawMessage) json.RawMessage {
	if v == nil {
		return json.RawMessage("null")
	}
	return v
}

// parseGraphInputs validates a graph workflow's inputs: delayMs an integer
// 0..60000, url (optional) a destination the policy admits.
func parseGraphInputs(req *CreateRequest, g Graph, inputs map[string]json.RawMessage, policy *WebhookPolicy) *apierr.Error {
	req.DelayMs = g.DefaultDelayMs
	if d, ok := inputs["delayMs"]; ok {
		var n int
		if len(d) == 0 || d[0] == '"' || json.Unmarshal(d, &n) != nil || n < 0 || n > maxGraphDelayMs {
			return validation("inputs.delayMs", fmt.Sprintf("inputs.delayMs must be an integer 0..%d", maxGraphDelayMs))
		}
		req.DelayMs = n
	}
	if u, ok := inputs["url"]; ok {
		if json.Unmarshal(u, &req.URL) != nil || req.URL == "" {
			return validation("inputs.url", "inputs.url must be a non-empty string")
		}
		if err := policy.CheckURL(req.URL); err != nil {
			return apierr.New(400, apierr.CodeWebhookURLRejected, "%s", err.Error()).
				WithDetails(map[string]any{"field": "inputs.url"})
		}
	}
	return nil
}

// NoopEffectGraph is conformance-noop as an executor with
// execfn.Executor.NoopEffect runs it: one side-effecting node, so the
// effect ledger of a noop run has a row to read (`idemkit dev
// --conformance-seams`, where the suite reads the ledger keying and the
// effect ids from a noop run).
var NoopEffectGraph = Graph{Nodes: []Node{{"effect", TypeSideEffect}}, Next: map[string]string{}, MaxLoopback: 1}
