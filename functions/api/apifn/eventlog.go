package apifn

import (
	"encoding/json"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// logEvents returns a run's events before its terminal one, and the
// sequence the terminal event takes:
//
//   - a fork with fromSeq > 0 starts with its fixed history: the source's
//     events with sequence < fromSeq as the source serves them (type,
//     nodeId, payload, timestamp and sequence), under the fork's runId and
//     with eventIds of the fork's own, as every event of a run (eventID):
//     an eventId is globally unique and run-scoped, so two runs never
//     serve one (RED_TEAM 539); any other run with run.started at
//     sequence 0;
//   - then the run's own node events (Run.Log), one sequence each, in the
//     order the executor recorded them.
//
// It also returns the time of the last of them. Each event's time is the
// time recorded for it, or the time of the event before it when that is
// later (see atOrAfter).
func logEvents(r runs.Run) ([]RunEvent, int64, time.Time) {
	var evs []RunEvent
	var last time.Time
	if r.Fork != nil && r.Fork.FromSeq > 0 && len(r.Fork.Inherited) > 0 {
		for _, e := range r.Fork.Inherited {
			evs = append(evs, RunEvent{EventID: eventID(r.ID, e.Sequence), RunID: r.ID, NodeID: e.NodeID, Type: e.Type,
				Payload: e.Payload, Timestamp: e.Timestamp, Sequence: e.Sequence, SchemaVersion: 1})
			if ts, err := time.Parse(time.RFC3339Nano, e.Timestamp); err == nil {
				last = atOrAfter(ts, last)
			}
		}
	} else {
		// run.started echoes the run's owner block and the transport it
		// was created through (every run here: the REST API).
		last = r.CreatedAt
		evs = append(evs, newRunEvent(r, 0, EventRunStarted, last,
			map[string]any{"workflowId": r.WorkflowID, "owner": runOwner(r), "transport": "rest"}))
	}
	next := r.LogBase()
	for _, e := range r.Log {
		last = atOrAfter(e.At, last)
		ev := newRunEvent(r, next, e.Type, last, json.RawMessage(e.Payload))
		ev.NodeID = e.NodeID
		evs = append(evs, ev)
		next++
	}
	if held := heldPause(r); held != nil {
		last = atOrAfter(held.At, last)
		evs = append(evs, newRunEvent(r, next, held.Type, last, json.RawMessage(held.Payload)))
		next++
	}
	return evs, next, last
}

// heldPause is the run.paused event a run that ended still holds: paused
// to let its node drain (runs.DrainCurrentNode) and cancelled before the
// node ended or the run was resumed. Its events show it after its log,
// before its end, so the pause is never missing from them. Nil for any
// other run (a live run's held event is not in its events until its node
// ends or it is resumed).
func heldPause(r runs.Run) *runs.LogEvent {
	if !r.Status.Terminal() {
		return nil
	}
	return r.PausePending
}

// endedAt is the time a terminal run's terminal event is served at
// (RunEvents): its end (UpdatedAt), or the time of the event before it
// when that is later. The snapshot's completedAt is this time, so GET
// /runs/{runId} and the log it projects agree however the clocks that
// stamped them disagree. It reads the times logEvents reads, building no
// event.
func endedAt(r runs.Run) time.Time {
	last := r.CreatedAt
	if r.Fork != nil && r.Fork.FromSeq > 0 && len(r.Fork.Inherited) > 0 {
		last = time.Time{}
		for _, e := range r.Fork.Inherited {
			if ts, err := time.Parse(time.RFC3339Nano, e.Timestamp); err == nil {
				last = atOrAfter(ts, last)
			}
		}
	}
	for _, e := range r.Log {
		last = atOrAfter(e.At, last)
	}
	if held := heldPause(r); held != nil {
		last = atOrAfter(held.At, last)
	}
	return atOrAfter(r.UpdatedAt, last)
}

// atOrAfter is the time an event recorded at `at` is served at when the
// event before it is served at prev: at, or prev when that is later.
// A run's times are stamped on more than one clock (createdAt and a
// cancel's updatedAt on the api function's, node events and the
// executor's ends on the executor's), and clocks disagree: a cancel
// stamped a second after createRun on the api's clock lands after a node
// event stamped five seconds ahead on the executor's. Served as
// recorded, run.cancelled would read before the node.started it follows.
// So the log's times never go back as its sequence goes on: a projection
// of what is stored, costing nothing, and stable, since an event's time
// depends only on the events before it, which never change.
func atOrAfter(at, prev time.Time) time.Time {
	if at.Before(prev) {
		return prev
	}
	return at
}

// inherit returns the events of src with sequence < fromSeq as a fork
// keeps them.
func inherit(src runs.Run, fromSeq int64) ([]runs.InheritedEvent, error) {
	return keep(src, func(e RunEvent) bool { return e.Sequence < fromSeq })
}

// recorded returns the node events and run.paused events of src with
// sequence >= fromSeq as a replay fork compares its re-execution with them
// (runs.Fork.Recorded): a run.paused naming a node says the attempt before
// it was cut and the node started afresh, so that start is no place to
// compare (RED_TEAM 469).
func recorded(src runs.Run, fromSeq int64) ([]runs.InheritedEvent, error) {
	return keep(src, func(e RunEvent) bool {
		return e.Sequence >= fromSeq && (e.NodeID != "" || e.Type == runs.EventRunPaused)
	})
}

// keep returns the events of src that in admits, as a fork keeps them.
func keep(src runs.Run, in func(RunEvent) bool) ([]runs.InheritedEvent, error) {
	var out []runs.InheritedEvent
	for _, e := range RunEvents(src) {
		if !in(e) {
			continue
		}
		p, err := json.Marshal(e.Payload)
		if err != nil {
			return nil, err
		}
		out = append(out, runs.InheritedEvent{EventID: e.EventID, Sequence: e.Sequence, Type: e.Type, NodeID: e.NodeID,
			Timestamp: e.Timestamp, Payload: p})
	}
	return out, nil
}
