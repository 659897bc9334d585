package runs

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"
)

// StatusPaused is the status of a run an operator paused (pauseRun): not
// terminal, not live. The executor starts no node of it, the stale-run and
// due passes never take it (the stale-run pass only records the run.paused
// a stopped execution left held: ReleaseStalePause), and only Unpause
// (resumeRun) or a cancel moves it on.
const StatusPaused Status = "paused"

// The drain policies of a pause (pauseRun's drainPolicy).
const (
	// DrainCurrentNode lets the node executing when the run is paused
	// record its terminal event first: its run.paused event follows it.
	// The default.
	DrainCurrentNode = "drain-current-node"
	// DrainImmediate cuts the executing attempt: the pause takes the run
	// from its execution (its claim epoch moves on, so the execution
	// writes nothing more: no terminal event for the cut attempt) and its
	// run.paused names the node and attempt cut; the resumed run starts
	// the node afresh (node.started).
	DrainImmediate = "immediate"
)

// The run events a pause and a resume record in the run's log (Run.Log,
// with no node id).
const (
	EventRunPaused  = "run.paused"
	EventRunResumed = "run.resumed"
)

// MaxPauses is the most pauses a run records, and maxPauseBytes the most
// bytes of its run.paused and run.resumed payloads before another pause:
// each pause and resume adds an event and a version to the run's item,
// which DynamoDB refuses past 400 KB, and a run whose item is full can be
// neither resumed nor cancelled (RED_TEAM 378). With a run's inputs at
// their bound, both leave room for the run's own node log, its last
// resume and its cancel.
const (
	MaxPauses     = 100
	maxPauseBytes = 64 << 10
)

// ErrPauseLimit is returned by Pause, changing nothing, for a run that
// recorded MaxPauses pauses (or maxPauseBytes of their events): it is
// resumed and cancelled as any other, never paused again.
var ErrPauseLimit = errors.New("host: the run recorded the most pauses it can")

// pausesSpent reports how many pauses r recorded and whether another
// would pass MaxPauses or maxPauseBytes.
func pausesSpent(r Run) (pauses int, full bool) {
	size := 0
	for _, ev := range r.Log {
		switch ev.Type {
		case EventRunPaused:
			pauses++
			size += len(ev.Payload)
		case EventRunResumed:
			size += len(ev.Payload)
		}
	}
	if r.PausePending != nil {
		pauses++
		size += len(r.PausePending.Payload)
	}
	return pauses, pauses >= MaxPauses || size >= maxPauseBytes
}

// Pause is a pause request as a store records it.
type Pause struct {
	// Drain is DrainCurrentNode ("" means it) or DrainImmediate.
	Drain string
	// Reason is the request's reason ("" when none): run.paused echoes it.
	Reason string
	// By is the pause request's Layer-1 record ID (or a token of a
	// request without a key), recorded as the run's PausedBy: a retry of
	// that request finds its own pause.
	By string
}

// ValidDrain reports whether d names a drain policy ("" is the default).
func ValidDrain(d string) bool { return d == "" || d == DrainCurrentNode || d == DrainImmediate }

// PauseStore pauses and resumes runs. MemRuns and DynamoRuns implement it.
type PauseStore interface {
	// Pause moves a live (pending or running) run to paused, a
	// compare-and-set on the run as read (its status, version, claim
	// epoch and log), and records its run.paused event: appended to the
	// log in the same write, or, under DrainCurrentNode while a node's
	// attempt is under way (a node.started with no terminal event yet),
	// held on the run (PausePending) until that node's terminal event is
	// appended (AppendLog appends both in one write), or the execution
	// parks the run instead (Park appends it), or the execution stops
	// mid-node and the stale-run pass finds its claim unrenewed
	// (ReleaseStalePause appends it: the run stays listed by Stale while
	// the event is held), or until Unpause (a cancel of the paused run
	// leaves it held on the ended run). A run parked mid-node has no
	// execution under way: its event is appended at once.
	// Under DrainImmediate the write also moves the claim epoch on (the
	// execution under way is fenced: it appends, renews, parks and
	// finishes nothing more) and the event names the attempt cut. The
	// wake of a parked run is cleared (a resume drives it anew). It
	// returns the run as stored; ErrStatusConflict with the run as it is
	// when it is not live (paused, ended); ErrPauseLimit with the run
	// when it recorded the most pauses it can (pausesSpent); ErrRunNotFound when there is
	// none. A retry of a pause that applied (PausedBy p.By: no later
	// pause) returns the run and no error, whatever its status since: a
	// resume in between is not undone by pausing the run again.
	Pause(ctx context.Context, id string, p Pause, now time.Time) (Run, error)
	// Unpause moves a paused run back to running, a compare-and-set on
	// the run as read, and records run.resumed (after the pause's held
	// run.paused, if its node never drained) in the same write. It takes
	// the run from any execution still draining (claim epoch + 1): the
	// executor's next delivery of it (the runs stream's record of the
	// change paused -> running, else the stale-run pass) adopts it and
	// continues it. by is recorded as ResumedBy. ErrStatusConflict with
	// the run as it is when it is not paused; ErrRunNotFound when there
	// is none. A retry of an Unpause that applied (ResumedBy by: no later
	// resume) returns the run and no error, whatever its status since (a
	// pause in between is not undone).
	Unpause(ctx context.Context, id, by, reason string, now time.Time) (Run, error)
	// ReleaseStalePause is the stale-run pass's release of a pause's held
	// run.paused whose node will not drain: r is the run as the pass read
	// it (Claim's refusal), paused under DrainCurrentNode with its
	// run.paused held, and its claim not renewed since before (the
	// pass's threshold, the executor's StaleAfter). Its execution stopped
	// mid-node (it died, or ended on a transient failure, which
	// NoteFailure does not count on a paused run), so only a resume would
	// record the event. In one conditional write, only while the run is
	// still paused, holding that event under r's claim epoch, with
	// updatedAt at or before before, the event is appended to the log
	// (at now), the run stays paused and leaves Stale; the claim epoch
	// and version stay, and the execution, should it come back, is
	// refused its node's end and its renewals as after a drain (the
	// resumed run continues the node). It returns the run as stored;
	// ErrStatusConflict with the run as it is when it is not so (the
	// node drained, the execution renewed or parked, a resume, a cancel,
	// another release: the event is shown once); ErrRunNotFound when
	// there is none.
	ReleaseStalePause(ctx context.Context, r Run, before, now time.Time) (Run, error)
}

// Guard is a condition on the run a guarded pause or resume writes
// (GuardedPauseStore), for a write decided against an earlier version of
// the run: the store calls it with the run as it reads it, after finding
// the request's own earlier write (a retry of a write that applied is
// answered as before, never guarded) and before any other check, and
// again each time its write finds the run moved since that read. A
// non-nil error is returned with the run as read and nothing is written;
// nil lets the write proceed, conditional on the run still being as the
// guard saw it (its version included), so nothing the guard read changes
// between the guard and the write. MemRuns calls it under its lock: a
// Guard never calls the store.
type Guard func(Run) error

// GuardedPauseStore is a PauseStore whose pause and resume take a Guard
// checked in the write's own compare-and-set. MemRuns and DynamoRuns
// implement it; their Pause and Unpause are these with a nil Guard.
type GuardedPauseStore interface {
	PauseStore
	// PauseGuarded is Pause, refused with g's error (the run as read,
	// nothing written) when g refuses the run as read.
	PauseGuarded(ctx context.Context, id string, p Pause, g Guard, now time.Time) (Run, error)
	// UnpauseGuarded is Unpause, refused with g's error (the run as read,
	// nothing written) when g refuses the run as read.
	UnpauseGuarded(ctx context.Context, id, by, reason string, g Guard, now time.Time) (Run, error)
}

var (
	_ GuardedPauseStore = (*MemRuns)(nil)
	_ GuardedPauseStore = (*DynamoRuns)(nil)
)

// live reports whether s is a status the executor drives (pending,
// running).
func live(s Status) bool { return s == StatusPending || s == StatusRunning }

// pauseDecided reports whether a pause p of r as read is decided without
// a write: done with a nil error when r already holds this pause's own
// write (a retry after its answer was lost, RED_TEAM 376), with g's error
// when the guard g (nil for none) refuses r, with ErrStatusConflict when
// r is not live, with ErrPauseLimit when r has recorded the most pauses
// it may.
func pauseDecided(r Run, p Pause, g Guard) (done bool, err error) {
	switch {
	case p.By != "" && r.PausedBy == p.By:
		return true, nil
	case g != nil:
		if err := g(r); err != nil {
			return true, err
		}
	}
	if !live(r.Status) {
		return true, ErrStatusConflict
	}
	if _, full := pausesSpent(r); full {
		return true, ErrPauseLimit
	}
	return false, nil
}

// resumeDecided is pauseDecided for a resume by writer by: done when r
// holds this resume's own write, when g refuses r, or
// (ErrStatusConflict) when r is not paused.
func resumeDecided(r Run, by string, g Guard) (done bool, err error) {
	switch {
	case by != "" && r.ResumedBy == by:
		return true, nil
	case g != nil:
		if err := g(r); err != nil {
			return true, err
		}
	}
	if r.Status != StatusPaused {
		return true, ErrStatusConflict
	}
	return false, nil
}

// OpenNode returns the node whose attempt is under way in log (its last
// node.started with no terminal event of that node after it, and not cut
// by an immediate pause) and that attempt's number (its node.started
// events since the node's last terminal event); "" and 0 when none is.
func OpenNode(log []LogEvent) (node string, attempt int) {
	open := false
	for _, ev := range log {
		switch ev.Type {
		case EventNodeStarted:
			if ev.NodeID != node {
				node, attempt = ev.NodeID, 0
			}
			attempt++
			open = true
		case EventNodeCompleted, EventNodeFailed:
			if ev.NodeID == node {
				node, attempt, open = "", 0, false
			}
		case EventRunPaused:
			if CutNode(ev) != "" {
				open = false
			}
		}
	}
	if !open {
		return "", 0
	}
	return node, attempt
}

// CutNode is the node whose attempt the run.paused event ev cut (its
// interruptedNodeId), "" for any other event.
func CutNode(ev LogEvent) string {
	if ev.Type != EventRunPaused {
		return ""
	}
	var p struct {
		Node string `json:"interruptedNodeId"`
	}
	if json.Unmarshal(ev.Payload, &p) != nil {
		return ""
	}
	return p.Node
}

// planPause is what pausing r under p writes: its run.paused event ev,
// whether the event is held until the open node drains (pending), and
// whether the claim epoch moves on (fence).
func planPause(r Run, p Pause, now time.Time) (ev LogEvent, pending, fence bool) {
	drain := p.Drain
	if drain == "" {
		drain = DrainCurrentNode
	}
	payload := map[string]any{"drainPolicy": drain}
	if p.Reason != "" {
		payload["reason"] = p.Reason
	}
	node, attempt := OpenNode(r.Log)
	if drain == DrainImmediate {
		fence = true
		if node != "" {
			payload["interruptedNodeId"], payload["interruptedAttempt"] = node, attempt
		}
	} else {
		// Held only while an execution may drain the node: a parked run's
		// node waits for its wake, which the pause clears (RED_TEAM 377).
		pending = node != "" && r.Wake.IsZero()
	}
	b, _ := json.Marshal(payload)
	return LogEvent{Type: EventRunPaused, At: tableTime(now), Payload: b}, pending, fence
}

// resumedEvent is the run.resumed event of a resume at now.
func resumedEvent(reason string, now time.Time) LogEvent {
	payload := map[string]any{}
	if reason != "" {
		payload["reason"] = reason
	}
	b, _ := json.Marshal(payload)
	return LogEvent{Type: EventRunResumed, At: tableTime(now), Payload: b}
}

// pauseVersion is the version log entry of a pause of r.
func pauseVersion(r Run) map[string]json.RawMessage {
	if !r.Wake.IsZero() {
		return version(FieldStatus, StatusPaused, fieldWake, nil)
	}
	return version(FieldStatus, StatusPaused)
}

// drains reports whether evs, appended to log under a pause held for the
// open node (PausePending), are that node's terminal event (with what
// goes in its write, never a node.started).
func drains(log []LogEvent, evs []LogEvent) bool {
	node, _ := OpenNode(log)
	if node == "" || len(evs) == 0 || evs[0].NodeID != node ||
		(evs[0].Type != EventNodeCompleted && evs[0].Type != EventNodeFailed) {
		return false
	}
	for _, ev := range evs[1:] {
		if ev.Type == EventNodeStarted {
			return false
		}
	}
	return true
}

// drained is the held run.paused event as appended after evs at now: at
// the drained node's end, never before an event ahead of it.
func drained(pending LogEvent, evs []LogEvent, now time.Time) LogEvent {
	at := tableTime(now)
	for _, ev := range evs {
		if ev.At.After(at) {
			at = tableTime(ev.At)
		}
	}
	if pending.At.After(at) {
		at = pending.At
	}
	pending.At = at
	return pending
}

// Pause implements PauseStore.
func (m *MemRuns) Pause(ctx context.Context, id string, p Pause, now time.Time) (Run, error) {
	return m.PauseGuarded(ctx, id, p, nil, now)
}

// PauseGuarded implements GuardedPauseStore: g is called under the
// store's lock.
func (m *MemRuns) PauseGuarded(_ context.Context, id string, p Pause, g Guard, now time.Time) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.lookupLocked(id)
	if !ok {
		return Run{}, ErrRunNotFound
	}
	if done, err := pauseDecided(r, p, g); done {
		return r, err
	}
	ev, pending, fence := planPause(r, p, now)
	r.History = appendVersion(r.History, pauseVersion(r))
	r.Version = r.History.Current()
	r.Status, r.UpdatedAt, r.Wake = StatusPaused, tableTime(now), Wake{}
	if pending {
		r.PausePending = &ev
	} else {
		r.Log = append(slices.Clone(r.Log), ev)
	}
	if fence {
		r.Epoch++
	}
	if p.By != "" {
		r.PausedBy = p.By
	}
	m.runs[id] = r
	return r, nil
}

// Unpause implements PauseStore.
func (m *MemRuns) Unpause(ctx context.Context, id, by, reason string, now time.Time) (Run, error) {
	return m.UnpauseGuarded(ctx, id, by, reason, nil, now)
}

// UnpauseGuarded implements GuardedPauseStore: g is called under the
// store's lock.
func (m *MemRuns) UnpauseGuarded(_ context.Context, id, by, reason string, g Guard, now time.Time) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.lookupLocked(id)
	if !ok {
		return Run{}, ErrRunNotFound
	}
	if done, err := resumeDecided(r, by, g); done {
		return r, err
	}
	r.Log = append(slices.Clone(r.Log), resumeEvents(r, reason, now)...)
	r.PausePending = nil
	r.Status, r.UpdatedAt = StatusRunning, tableTime(now)
	r.Epoch++
	if by != "" {
		r.ResumedBy = by
	}
	r.History = appendVersion(r.History, version(FieldStatus, StatusRunning))
	r.Version = r.History.Current()
	m.runs[id] = r
	return r, nil
}

// resumeEvents are the events a resume of r appends: the pause's held
// run.paused (its node never drained) and run.resumed.
func resumeEvents(r Run, reason string, now time.Time) []LogEvent {
	var evs []LogEvent
	if r.PausePending != nil {
		evs = append(evs, *r.PausePending)
	}
	return append(evs, resumedEvent(reason, now))
}

// releasable reports whether a park of r under epoch, refused because r
// is paused, records r's held run.paused: the execution draining its
// node (epoch) parks it instead, so the node does not drain until a
// resume (RED_TEAM 377).
func releasable(r Run, epoch int64) bool {
	return r.Status == StatusPaused && r.PausePending != nil && r.Epoch == epoch
}

// Park implements RunStore: Schedule of a running run under epoch; a
// park refused because the run was paused while its node drained records
// the held run.paused (releasable) and is still refused.
func (m *MemRuns) Park(_ context.Context, id string, epoch int64, w Wake, now time.Time) (Run, error) {
	var released *Run
	r, err := m.schedule(id, func(r Run) bool {
		if releasable(r, epoch) { // under m.mu, which schedule holds
			r.Log = append(slices.Clone(r.Log), drained(*r.PausePending, nil, now))
			r.PausePending, r.UpdatedAt = nil, tableTime(now)
			m.runs[id] = r
			released = &r
		}
		return r.Status == StatusRunning && r.Epoch == epoch
	}, w, now)
	if released != nil {
		return *released, err
	}
	return r, err
}

// renewable reports whether an execution holding r's claim may renew it:
// r is live, or paused with its run.paused held for the node that
// execution drains.
func renewable(r Run) bool {
	return live(r.Status) || drainHeld(r)
}

// drainHeld reports whether r is paused with its run.paused held for the
// node its execution drains: that execution renews its claim, and the
// stale-run pass (Stale) lists r once it stops (ReleaseStalePause).
func drainHeld(r Run) bool { return r.Status == StatusPaused && r.PausePending != nil }

// ReleaseStalePause implements PauseStore.
func (m *MemRuns) ReleaseStalePause(_ context.Context, read Run, before, now time.Time) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.lookupLocked(read.ID)
	if !ok {
		return Run{}, ErrRunNotFound
	}
	if read.PausePending == nil || !drainHeld(r) || r.Epoch != read.Epoch || r.UpdatedAt.After(before) {
		return r, ErrStatusConflict
	}
	r.Log = append(slices.Clone(r.Log), drained(*r.PausePending, nil, now))
	r.PausePending, r.UpdatedAt = nil, tableTime(now)
	m.runs[read.ID] = r
	return r, nil
}

// CutStarts are the indexes in log of the node.started events whose
// attempts an immediate pause cut: for each run.paused naming a node
// (CutNode), that node's last node.started before it not already cut. A
// walk of the log's node events leaves them out (the node starts afresh),
// and so does a replay's comparison with its source.
func CutStarts(log []LogEvent) map[int]bool {
	var cut map[int]bool
	for i, ev := range log {
		node := CutNode(ev)
		if node == "" {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			if log[j].Type == EventNodeStarted && log[j].NodeID == node && !cut[j] {
				if cut == nil {
					cut = map[int]bool{}
				}
				cut[j] = true
				break
			}
		}
	}
	return cut
}
