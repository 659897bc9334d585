// Package divergence is replay divergence: how a replay fork's re-executed
// node event is compared with the source's event at the same place of the
// log, and the replay.diverged event that records a difference (the
// replay continues).
package divergence

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// Event is the run event a replay fork records right after a re-executed
// node event that differs from the source's event at the same place of the
// log. The replay continues.
const Event = "replay.diverged"

// Divergence kinds (the replay.diverged payload's divergenceKind).
const (
	// Output: same event type and node, another payload.
	Output = "output"
	// TypeMismatch: another event type or node at that place.
	TypeMismatch = "type-mismatch"
	// Extra: the source, complete, recorded no event there.
	Extra = "extra"
)

// Diverged is the payload of a replay.diverged event
// (run-event-payloads.schema.json replayDiverged, a closed object).
type Diverged struct {
	SourceRunID string `json:"sourceRunId"`
	// AtSequence is the sequence of the diverging event in the fork's log.
	AtSequence int64 `json:"atSequence"`
	// OriginalEventID is the source's event at that place ("" for extra).
	OriginalEventID string `json:"originalEventId,omitempty"`
	DivergenceKind  string `json:"divergenceKind"`
	// DivergencePoint is the type of the fork's diverging event.
	DivergencePoint string `json:"divergencePoint"`
}

// Of compares ev, the node event a replay fork r is about to append
// to its log, with the source's event at the same place, and returns the
// replay.diverged payload when they differ (nil when they agree, when r is
// no replay, or when the source had not recorded that far and was still
// running when the fork was created: there is nothing to differ from).
//
// Places are counted in node events only: ev is the fork's k-th own node
// event (its replay.diverged events not counted) and is compared with the
// source's k-th recorded node event from fromSeq, so one divergence does
// not shift every later comparison. Run-scoped fields (eventId, runId,
// timestamp) are not compared, nor the payload's x- extension members
// (this host's note of how an outcome came about: a replay resolves what
// the source performed).
//
// A fork whose prefix leaves a node open (RestartedNode) re-executes that
// node from its start, so its first own node event is a fresh node.started
// that the source's log from fromSeq has no counterpart for when the
// source's attempt went on to its end: it is not compared, and not counted
// as a place. When an immediate pause cut the source's attempt at or after
// fromSeq (its run.paused is among the recorded events), the source
// started the node afresh too, and the two fresh starts are each other's
// counterparts (RED_TEAM 469).
func Of(r runs.Run, ev runs.LogEvent) *Diverged {
	if !r.IsReplay() || !nodeEvent(ev.Type) {
		return nil
	}
	// The source's side: the open node's inherited start (when the prefix
	// leaves one open), then the recorded events, less every attempt an
	// immediate pause cut (runs.CutStarts), the inherited one included.
	open := r.RestartedNode()
	var srcLog []runs.LogEvent
	if open != "" {
		srcLog = append(srcLog, runs.LogEvent{Type: runs.EventNodeStarted, NodeID: open})
	}
	srcLog = append(srcLog, logOf(r.Fork.Recorded)...)
	srcCut := runs.CutStarts(srcLog)
	if open != "" && srcCut[0] {
		open = "" // the source restarted it too: its fresh start is a place
	}
	var rec []runs.InheritedEvent
	for i, e := range r.Fork.Recorded {
		j := i + len(srcLog) - len(r.Fork.Recorded)
		if nodeEvent(e.Type) && !srcCut[j] {
			rec = append(rec, e)
		}
	}
	k := 0
	cut := runs.CutStarts(r.Log)
	for i, e := range r.Log {
		if nodeEvent(e.Type) && !cut[i] {
			k++
		}
	}
	if open != "" {
		if k == 0 && ev.Type == runs.EventNodeStarted && ev.NodeID == open {
			return nil
		}
		if typ, node := firstOwnNodeEvent(r); k > 0 && typ == runs.EventNodeStarted && node == open {
			k--
		}
	}
	seq := r.LogBase() + int64(len(r.Log))
	d := &Diverged{SourceRunID: r.Fork.SourceRunID, AtSequence: seq, DivergencePoint: ev.Type}
	if k >= len(rec) {
		if !r.Fork.SourceComplete {
			return nil
		}
		d.DivergenceKind = Extra
		return d
	}
	src := rec[k]
	d.OriginalEventID = src.EventID
	switch {
	case src.Type != ev.Type || src.NodeID != ev.NodeID:
		d.DivergenceKind = TypeMismatch
	case !samePayload(src.Payload, ev.Payload):
		d.DivergenceKind = Output
	default:
		return nil
	}
	return d
}

// firstOwnNodeEvent is the type and node of r's first own node event
// ("" when none).
func firstOwnNodeEvent(r runs.Run) (typ, nodeID string) {
	cut := runs.CutStarts(r.Log)
	for i, e := range r.Log {
		if nodeEvent(e.Type) && !cut[i] {
			return e.Type, e.NodeID
		}
	}
	return "", ""
}

// logOf is evs as log events (type, node and payload), for
// runs.CutStarts.
func logOf(evs []runs.InheritedEvent) []runs.LogEvent {
	out := make([]runs.LogEvent, len(evs))
	for i, e := range evs {
		out[i] = runs.LogEvent{Type: e.Type, NodeID: e.NodeID, Payload: e.Payload}
	}
	return out
}

func nodeEvent(typ string) bool {
	return typ == runs.EventNodeStarted || typ == runs.EventNodeCompleted || typ == runs.EventNodeFailed
}

// samePayload compares two JSON payloads as values, without their
// top-level x- extension members.
func samePayload(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ma, mb map[string]any
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		return false
	}
	for _, m := range []map[string]any{ma, mb} {
		for k := range m {
			if strings.HasPrefix(k, "x-") {
				delete(m, k)
			}
		}
	}
	return reflect.DeepEqual(ma, mb)
}
