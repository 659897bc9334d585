package apifn

import (
	"encoding/json"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// logEvents returns a run's events before its terminal one, and the
// sequence the terminal event takes:
//
//   - a fork with fromSeq > 0 starts with its fixed history: the source's
//     events with sequence < fromSeq, byte for byte as the source serves
//     them (eventId, type, nodeId, payload, timestamp and sequence), under
//     the fork's runId; any other run with run.started at sequence 0;
//   - then the run's own node events (Run.Log), one sequence each, in the
//     order the executor recorded them.
func logEvents(r runs.Run) ([]RunEvent, int64) {
	var evs []RunEvent
	if r.Fork != nil && r.Fork.FromSeq > 0 && len(r.Fork.Inherited) > 0 {
		for _, e := range r.Fork.Inherited {
			evs = append(evs, RunEvent{EventID: e.EventID, RunID: r.ID, NodeID: e.NodeID, Type: e.Type,
				Payload: e.Payload, Timestamp: e.Timestamp, Sequence: e.Sequence, SchemaVersion: 1})
		}
	} else {
		// run.started echoes the run's owner block and the transport it
		// was created through (every run here: the REST API).
		evs = append(evs, newRunEvent(r, 0, EventRunStarted, r.CreatedAt,
			map[string]any{"workflowId": r.WorkflowID, "owner": runOwner(r), "transport": "rest"}))
	}
	next := r.LogBase()
	for _, e := range r.Log {
		ev := newRunEvent(r, next, e.Type, e.At, json.RawMessage(e.Payload))
		ev.NodeID = e.NodeID
		evs = append(evs, ev)
		next++
	}
	return evs, next
}

// inherit returns the events of src with sequence < fromSeq as a fork
// keeps them.
func inherit(src runs.Run, fromSeq int64) ([]runs.InheritedEvent, error) {
	return keep(src, func(e RunEvent) bool { return e.Sequence < fromSeq })
}

// recorded returns the node events of src with sequence >= fromSeq as a
// replay fork compares its re-execution with them (runs.Fork.Recorded).
func recorded(src runs.Run, fromSeq int64) ([]runs.InheritedEvent, error) {
	return keep(src, func(e RunEvent) bool { return e.Sequence >= fromSeq && e.NodeID != "" })
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
