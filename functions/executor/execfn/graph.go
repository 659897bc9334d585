package execfn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"log/slog"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/runs/divergence"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/ledger"
)

// CodeReplaySourceMissing is the node.failed error code of a replay fork's
// side-effecting node whose source execution recorded no outcome.
const CodeReplaySourceMissing = "replay_source_missing"

// codeNodeFailed is the vendor node.failed code of a node whose effect
// ended in a recorded failure.
const codeNodeFailed = "idemkit.node_failed"

// Markers of how a side-effecting node's outcome came about, carried on its
// node.completed payload (the payloads' x- extension seat), so an operator
// reads a branch's re-fire as a re-fire and never as suppression.
const (
	effectPerformed = "performed"
	effectResolved  = "resolved-from-source"
	effectRefired   = "branch-refired"
	payloadEffect   = "x-idemkit-effect"
)

// NodeFailedError ends a graph run failed after its node.failed event was
// recorded: Code is the event's error code (CodeReplaySourceMissing for a
// replay without a recorded source outcome).
type NodeFailedError struct {
	NodeID, Code, Message string
}

func (e *NodeFailedError) Error() string {
	return fmt.Sprintf("node %s failed: %s: %s", e.NodeID, e.Code, e.Message)
}

// errRunEnded stops a graph walk whose run is no longer running
// (cancelled meanwhile) or no longer this execution's (taken over by
// another: its node-log appends are fenced): nothing more is executed or
// recorded.
var errRunEnded = errors.New("executor: the run ended meanwhile")

// step is one event of a run's history as the walk folds it.
type step struct{ typ, nodeID string }

// history is the run's node events in order: a fork's inherited events,
// then its own log. The start of an attempt an immediate pause cut
// (run.paused naming it, runs.CutNode, in either) is left out: the walk
// starts that node afresh, with a node.started of its own.
func history(run runs.Run) []step {
	log := withInherited(run)
	var out []step
	for _, i := range ownSteps(log) {
		out = append(out, step{log[i].Type, log[i].NodeID})
	}
	return out
}

// withInherited is a fork's inherited events (as log events) followed by
// the run's own log; the own log alone for a run that is no fork.
func withInherited(run runs.Run) []runs.LogEvent {
	if run.Fork == nil || len(run.Fork.Inherited) == 0 {
		return run.Log
	}
	out := make([]runs.LogEvent, 0, len(run.Fork.Inherited)+len(run.Log))
	for _, e := range run.Fork.Inherited {
		out = append(out, runs.LogEvent{Type: e.Type, NodeID: e.NodeID, Payload: e.Payload})
	}
	return append(out, run.Log...)
}

// ownSteps are the indexes in log of the events history walks: the node
// events (not a replay.diverged, cap.breached, run.paused or run.resumed
// event), less each node.started whose attempt an immediate pause cut
// (runs.CutStarts).
func ownSteps(log []runs.LogEvent) []int {
	cut := runs.CutStarts(log)
	var out []int
	for i, e := range log {
		if e.NodeID != "" && !cut[i] {
			out = append(out, i)
		}
	}
	return out
}

// logUnwritten is the error of an execution whose node-log append the
// store refused transiently (not a conflict: the run is still this
// execution's). What the node came to is in the ledger, not in the log:
// the last try executes the run once more (waitOut) rather than giving up
// on a node whose effect may have been delivered.
type logUnwritten struct{ err error }

func (e *logUnwritten) Error() string { return e.err.Error() }
func (e *logUnwritten) Unwrap() error { return e.err }

// historyPayloads is the payload of each of history(run)'s events, in the
// same order.
func historyPayloads(run runs.Run) []json.RawMessage {
	log := withInherited(run)
	var out []json.RawMessage
	for _, i := range ownSteps(log) {
		out = append(out, log[i].Payload)
	}
	return out
}

// recordedFailure is the *NodeFailedError of node nodeID's recorded
// node.failed event (payload its payload): the error the execution that
// recorded it ended with, so the run ends with that error whichever
// execution writes its end.
func recordedFailure(nodeID string, payload json.RawMessage) *NodeFailedError {
	var p struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(payload, &p) != nil || p.Error.Code == "" {
		return &NodeFailedError{NodeID: nodeID, Code: codeNodeFailed, Message: "recorded as failed"}
	}
	return &NodeFailedError{NodeID: nodeID, Code: p.Error.Code, Message: p.Error.Message}
}

// runGraph executes a graph workflow from where its history stands. The
// walk is deterministic (Graph: Nodes[0], then each node's outgoing edge,
// a node executing at most MaxLoopback times), so folding the recorded
// events (a fork's inherited prefix included) finds the next execution:
// a node whose node.completed is recorded is not executed again; one
// started but not ended is executed again from its start (its effect
// keeps its identity, so the ledger answers from the record). Each
// execution of a node has its own ordinal n: one more than the node's
// node.completed and node.failed events before it. A side-effecting node
// of a replay fork is resolved from the source's n-th execution
// (ledger.Ledger.Replay, keyed (sourceRunId, nodeId, n)), never performed,
// and fails closed (replay_source_missing) without one; the whole
// execution of a replay runs under runs.WithReplay, so every effect seam
// denies too. A replay's node event that differs from the source's at the
// same place (divergence.Of) is followed, in the same write, by a
// replay.diverged event, and the replay continues.
func (x *Executor) runGraph(ctx context.Context, run runs.Run, rc runCaps, g webhook.Graph) error {
	logs, ok := x.Runs.(runs.LogStore)
	if !ok {
		return errors.New("executor: the run store keeps no node log")
	}
	if run.IsReplay() {
		ctx = runs.WithReplay(ctx)
	}
	in := webhook.ReadGraphInputs(g, run.Inputs)
	hist := history(run)
	appendEv := func(typ, nodeID string, payload map[string]any) error {
		b, err := json.Marshal(payload)
		if err != nil {
			return err
		}
		evs := []runs.LogEvent{{Type: typ, NodeID: nodeID, At: x.now().UTC(), Payload: b}}
		if d := divergence.Of(run, evs[0]); d != nil {
			// Recorded with the diverging event, in the same write; the
			// replay continues.
			db, err := json.Marshal(d)
			if err != nil {
				return err
			}
			evs = append(evs, runs.LogEvent{Type: divergence.Event, At: evs[0].At, Payload: db})
			x.log().InfoContext(ctx, "executor: replay diverged from the source", slog.String("run_id", run.ID),
				slog.String("source_run_id", d.SourceRunID), slog.Int64("at_sequence", d.AtSequence),
				slog.String("divergence_kind", d.DivergenceKind), slog.Bool("openwop.replay.diverged", true))
		}
		r, err := logs.AppendLog(ctx, run.ID, run.Fence(), evs, x.now())
		if errors.Is(err, runs.ErrStatusConflict) || errors.Is(err, runs.ErrRunNotFound) {
			// Ended meanwhile, or taken by another execution (this one's
			// claim is fenced): nothing more is written.
			return errRunEnded
		}
		if err != nil {
			return &logUnwritten{err: err}
		}
		run.Log = r.Log
		return nil
	}
	// A fork whose prefix ends inside a node's execution restarts that
	// node with a fresh node.started (runs.Run.RestartedNode): the
	// inherited start is fixed history, the execution is not.
	inheritedSteps := len(history(runs.Run{Fork: run.Fork}))
	restartPending := false
	visits, terminals := map[string]int{}, map[string]int{}
	loopHead := g.LoopHead()
	i := 0
	for cur := g.Nodes[0].ID; cur != ""; cur = g.Next[cur] {
		node, ok := g.Node(cur)
		if !ok || visits[cur] >= g.MaxLoopback {
			break
		}
		visits[cur]++
		started := i < len(hist) && hist[i] == step{runs.EventNodeStarted, cur}
		if started {
			i++
			if i == inheritedSteps && run.RestartedNode() == cur {
				// The open node of the prefix: its fresh start is recorded
				// unless an earlier execution of this fork already did.
				if i < len(hist) && hist[i] == (step{runs.EventNodeStarted, cur}) {
					i++
				} else {
					restartPending = true
				}
			}
		}
		if i < len(hist) && hist[i].nodeID == cur && (hist[i].typ == runs.EventNodeCompleted || hist[i].typ == runs.EventNodeFailed) {
			terminals[cur]++
			if hist[i].typ == runs.EventNodeFailed {
				return recordedFailure(cur, historyPayloads(run)[i])
			}
			i++
			continue
		}
		n := terminals[cur] + 1
		// The run's caps, before the node executes: its runTimeoutMs,
		// and its maxLoopIterations when the node heads the loop (each
		// execution of the head is one iteration).
		if b := x.overdue(rc, ""); b != nil {
			return b
		}
		if cur == loopHead {
			if b := loopBreach(rc, cur, visits[cur]); b != nil {
				return b
			}
		}
		if !started || restartPending {
			restartPending = false
			if err := appendEv(runs.EventNodeStarted, cur, map[string]any{"nodeId": cur, "typeId": node.TypeID}); err != nil {
				return err
			}
			if x.Test.NodeStarted != nil {
				x.Test.NodeStarted(run.ID, cur)
			}
		}
		out, err := x.execNode(ctx, run, rc, node, n, in)
		var nf *NodeFailedError
		if errors.As(err, &nf) {
			if aerr := appendEv(runs.EventNodeFailed, cur, map[string]any{"nodeId": cur,
				"error": map[string]any{"code": nf.Code, "message": nf.Message}}); aerr != nil {
				return aerr
			}
			return nf
		}
		if err != nil {
			return err // transient or parked: the execution is repeated from its start
		}
		payload := map[string]any{"nodeId": cur, "outputs": map[string]any{}}
		if out != "" {
			payload[payloadEffect] = out
		}
		if err := appendEv(runs.EventNodeCompleted, cur, payload); err != nil {
			return err
		}
		terminals[cur]++
	}
	return nil
}

// execNode performs one execution (ordinal n) of node. For a
// side-effecting node it returns how the outcome came about.
func (x *Executor) execNode(ctx context.Context, run runs.Run, rc runCaps, node webhook.Node, n int, in webhook.GraphInputs) (string, error) {
	switch node.TypeID {
	case webhook.TypeNoop:
		return "", nil
	case webhook.TypeDelay, webhook.TypeHold:
		// Pure: re-executes live in a replay. The wait ends at the run's
		// deadline when that comes first (a run-duration breach).
		return "", x.hold(ctx, rc, node.ID, time.Duration(in.DelayMs)*time.Millisecond)
	case webhook.TypeSideEffect:
		return x.sideEffect(ctx, run, node, n, in)
	case webhook.TypeFail:
		return "", &NodeFailedError{NodeID: node.ID, Code: codeNodeFailed, Message: "the node fails on every execution (conformance-failure)"}
	}
	return "", &NodeFailedError{NodeID: node.ID, Code: codeNodeFailed, Message: "unknown node type " + node.TypeID}
}

// sideEffect is one execution of a side-effecting node.
func (x *Executor) sideEffect(ctx context.Context, run runs.Run, node webhook.Node, n int, in webhook.GraphInputs) (string, error) {
	if x.Webhook == nil {
		return "", errors.New("executor: no webhook deliverer configured")
	}
	ordinal := uint64(n - 1)
	if run.IsReplay() {
		recID, stamps := run.RecordOf(node.ID, n)
		src, err := webhook.NodeIdentity(stamps, run.Tenant, recID, node.ID, ordinal)
		if err != nil {
			return "", &NodeFailedError{NodeID: node.ID, Code: codeNodeFailed, Message: err.Error()}
		}
		return effectResolved, x.resolve(ctx, run, node.ID, n, src)
	}
	w, dest := x.Webhook, in.URL
	if dest == "" {
		w, dest = x.Fixture, x.FixtureURL
		if w == nil {
			w = x.Webhook
		}
		if dest == "" {
			return "", &NodeFailedError{NodeID: node.ID, Code: codeNodeFailed, Message: "no inputs.url and no fixture destination configured"}
		}
	}
	payload, err := nodePayload(run, node.ID, n)
	if err != nil {
		return "", err
	}
	ectx, stop := effectContext(ctx)
	res, err := w.DeliverNode(ectx, run, node.ID, ordinal, dest, payload)
	stop()
	if err != nil {
		if permanent(err) {
			return "", &NodeFailedError{NodeID: node.ID, Code: codeNodeFailed, Message: truncate(err.Error())}
		}
		return "", err
	}
	x.log().InfoContext(ctx, "executor: side effect", slog.String("run_id", run.ID), slog.String("node_id", node.ID),
		slog.Int("execution", n), slog.Bool("replayed", res.Replayed))
	if run.Fork != nil {
		return effectRefired, nil
	}
	return effectPerformed, nil
}

// nodePayload is what one execution (ordinal n) of a side-effecting node
// delivers: {runId, nodeId, execution}, and the run's configurable, the
// bytes persisted at create exactly (runs.Options), when it has one. The
// run's configurable never changes after creation, so every attempt of a
// node, whichever execution or process makes it, carries the same bytes.
func nodePayload(run runs.Run, nodeID string, n int) (json.RawMessage, error) {
	p := map[string]any{"runId": run.ID, "nodeId": nodeID, "execution": n}
	if len(run.Options.Configurable) > 0 {
		p["configurable"] = run.Options.Configurable
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the configurable's bytes as persisted
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// resolve answers a replay fork's side-effecting node from the source's
// record of the same execution: nil for a recorded success; a
// *NodeFailedError (replay_source_missing) when the source recorded no
// outcome, or (the recorded failure) when it recorded a failure.
func (x *Executor) resolve(ctx context.Context, run runs.Run, nodeID string, n int, src identity.Identity) error {
	_, err := x.Webhook.Ledger.Replay(ctx, src)
	switch {
	case errors.Is(err, ledger.ErrReplaySourceMissing):
		x.log().InfoContext(ctx, "executor: replay source missing, node failed closed", slog.String("run_id", run.ID),
			slog.String("node_id", nodeID), slog.Int("execution", n))
		return &NodeFailedError{NodeID: nodeID, Code: CodeReplaySourceMissing,
			Message: fmt.Sprintf("the source run %s recorded no outcome for execution %d of node %s; the effect is not performed", run.Fork.SourceRunID, n, nodeID)}
	case errors.Is(err, ledger.ErrEffectFailed):
		return &NodeFailedError{NodeID: nodeID, Code: codeNodeFailed, Message: truncate(err.Error())}
	}
	return err
}

// replayWebhook resolves a replay fork of a webhook run: its one delivery
// (execution 1 of NodeDeliver) is answered from the source's record of it,
// never sent; without one the run fails closed (replay_source_missing).
func (x *Executor) replayWebhook(ctx context.Context, run runs.Run) error {
	ctx = runs.WithReplay(ctx)
	src := run
	src.ID, src.Stamps = run.RecordOf(webhook.NodeDeliver, 1)
	src.Fork = nil
	id, err := webhook.WebhookIdentity(src)
	if err != nil {
		return err
	}
	return x.resolve(ctx, run, webhook.NodeDeliver, 1, id)
}
