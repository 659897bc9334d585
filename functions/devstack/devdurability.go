package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/apierr"
)

// The durability seam (`idemkit dev --conformance-seams` only): the host
// test hook the public suite's durability rows drive. It advertises
// nothing; without the flag its paths are the api's 404.
const (
	// durabilityKill stages one exercise: POST {mode, workflowId?,
	// effectUrl?}; GET lists the modes (the suite probes it without
	// firing).
	durabilityKill = "/host/durability/kill"
	// durabilityBound is the declared recovery bound and the terms it is
	// the sum of.
	durabilityBound = "/host/durability/bound"
)

// The kill modes of durabilityKill.
const (
	// modeAfterAccept accepts a run, holds its dispatch, answers, and
	// kills the process: the accepted work dispatches after the restart.
	modeAfterAccept = "after-accept"
	// modeDuringExecution accepts a run, answers, and kills the process
	// the moment the run's first node.started is recorded: the run is
	// resumed (workflow.restored) after the restart, its effect keeping
	// its identity.
	modeDuringExecution = "during-execution"
	// modeDuplicateDelivery accepts a webhook run to effectUrl and
	// delivers it to the executor twice more, concurrently, beside the
	// stream's own delivery: the destination receives it once.
	modeDuplicateDelivery = "duplicate-delivery"
)

// recoveryClass is the one recovery class idemkit dev declares: work
// interrupted by the death of the process, resumed after the supervisor
// restarted it.
const recoveryClass = "process-restart"

// codeUnsupervised is the vendor code of a kill mode asked of a stack no
// restart supervisor runs (devstack.Start in a test): killing it would
// end the exercise for good.
const codeUnsupervised = "idemkit.durability_unsupervised"

// Restart describes the restart supervisor a stack runs under (`idemkit dev
// --conformance-seams` runs itself as one): the durability seam's kill
// modes end the process with Kill and count on the supervisor to start it
// again on the same address, tables and keys.
type Restart struct {
	// Kill ends this process at once (SIGKILL: no shutdown of any kind).
	Kill func()
	// Delay is how long the supervisor waits before it starts the
	// process again, and BootBudget how long it waits for the new one to
	// serve before it gives up: two terms of the declared recovery bound.
	Delay, BootBudget time.Duration
}

// durability serves the durability seam and holds the executor's hooks.
type durability struct {
	runs    runs.RunStore
	policy  webhook.WebhookPolicy
	execute func(ctx context.Context, runID string) error
	restart *Restart
	// staleAfter and resumeEvery are the stale-run pass's terms.
	staleAfter, resumeEvery time.Duration

	mu     sync.Mutex
	held   map[string]bool
	killAt map[string]bool
	// dying is set once an after-accept exercise has decided to kill this
	// process: from then on the gateway serves nothing (CodeRestarting).
	dying atomic.Bool
}

func isDurabilityPath(rawPath string) bool {
	return rawPath == durabilityKill || rawPath == durabilityBound
}

// seamStart marks the context of the one start the seam makes itself.
type seamStart struct{}

// Held is the executor's TestConfig.Held: a held run is started by no one
// but the seam (its own start carries seamStart).
func (d *durability) Held(ctx context.Context, runID string) bool {
	if id, _ := ctx.Value(seamStart{}).(string); id == runID {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held[runID]
}

// NodeStarted is the executor's TestConfig.NodeStarted: the
// during-execution kill.
func (d *durability) NodeStarted(runID, _ string) {
	d.mu.Lock()
	kill := d.killAt[runID]
	d.mu.Unlock()
	if kill && d.restart != nil {
		d.restart.Kill()
	}
}

type boundTerm struct {
	Name string `json:"name"`
	Ms   int64  `json:"ms"`
}

// bound is the declared recovery bound of recoveryClass and its terms:
// the supervisor's restart delay and boot budget, then the stale-run
// pass (a run without progress for RUN_STALE_SECONDS is claimed, and the
// pass runs at least every resumeEvery). A restarted process usually
// resumes the work sooner, from the runs stream it re-reads from its
// checkpoint; the bound is what the mechanisms guarantee.
func (d *durability) bound() (int64, []boundTerm) {
	var delay, boot time.Duration
	if d.restart != nil {
		delay, boot = d.restart.Delay, d.restart.BootBudget
	}
	terms := []boundTerm{
		{"supervisor-restart-delay", delay.Milliseconds()},
		{"supervisor-boot-budget", boot.Milliseconds()},
		{"run-stale-after", d.staleAfter.Milliseconds()},
		{"stale-pass-interval", d.resumeEvery.Milliseconds()},
	}
	var sum int64
	for _, t := range terms {
		sum += t.Ms
	}
	return sum, terms
}

// writeJSON writes the answer whole: with its Content-Length and flushed,
// so it is complete on the connection when writeJSON returns, even if the
// seam kills the process before the handler returns (a chunked answer
// would lack its last chunk).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("OpenWOP-Version", settings.ProtocolVersion)
	w.WriteHeader(status)
	_, _ = w.Write(b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// serve answers an authenticated request on a durability path.
func (d *durability) serve(w http.ResponseWriter, r *http.Request, rawPath, tenant string, body []byte) {
	switch {
	case rawPath == durabilityBound && r.Method == http.MethodGet:
		total, terms := d.bound()
		writeJSON(w, http.StatusOK, map[string]any{"classes": []any{map[string]any{"class": recoveryClass, "bound": total, "terms": terms}}})
		return
	case rawPath == durabilityKill && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]any{"modes": []string{modeAfterAccept, modeDuringExecution, modeDuplicateDelivery},
			"supervised": d.restart != nil, "bound": durabilityBound})
		return
	case rawPath == durabilityKill && r.Method == http.MethodPost:
	default:
		allow := http.MethodGet
		if rawPath == durabilityKill {
			allow = "GET, POST"
		}
		w.Header().Set("Allow", allow)
		writeEnvelope(w, apierr.New(http.StatusMethodNotAllowed, "idemkit.method_not_allowed", "method not allowed; allowed: %s", allow))
		return
	}
	var in struct {
		Mode       string `json:"mode"`
		WorkflowID string `json:"workflowId"`
		EffectURL  string `json:"effectUrl"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || dec.More() {
		writeEnvelope(w, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the body must be a JSON object {mode, workflowId?, effectUrl?}"))
		return
	}
	switch in.Mode {
	case modeAfterAccept, modeDuringExecution:
		d.kill(w, r, tenant, in.Mode, in.WorkflowID)
	case modeDuplicateDelivery:
		d.duplicate(w, r, tenant, in.EffectURL)
	default:
		writeEnvelope(w, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "mode must be %s, %s or %s", modeAfterAccept, modeDuringExecution, modeDuplicateDelivery).
			WithDetails(map[string]any{"field": "mode"}))
	}
}

// kill stages after-accept or during-execution: the run is created held
// (the executor does not start it), the answer is written, and then the
// process is killed: at once (after-accept), or at the run's first
// node.started of the one start the seam makes itself (during-execution).
func (d *durability) kill(w http.ResponseWriter, r *http.Request, tenant, mode, workflowID string) {
	if d.restart == nil {
		writeEnvelope(w, apierr.New(http.StatusConflict, codeUnsupervised, "no restart supervisor runs this stack: a killed process would not come back (idemkit dev --conformance-seams runs one)"))
		return
	}
	if workflowID == "" {
		workflowID = webhook.WorkflowNoop
	}
	req, e := webhook.ParseCreate([]byte(`{"workflowId":`+quote(workflowID)+`}`), &d.policy)
	if e != nil {
		writeEnvelope(w, e)
		return
	}
	if _, graph := webhook.GraphOf(req.WorkflowID); !graph && req.WorkflowID != webhook.WorkflowNoop {
		writeEnvelope(w, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "workflowId must be conformance-noop or a graph fixture: a run that executes a node").
			WithDetails(map[string]any{"field": "workflowId"}))
		return
	}
	run := runs.NewRun(tenant, req.WorkflowID, req.Inputs, time.Now())
	d.mu.Lock()
	d.held[run.ID] = true
	d.mu.Unlock()
	if err := d.runs.Create(r.Context(), run); err != nil {
		writeEnvelope(w, apierr.New(http.StatusInternalServerError, "internal_error", "internal error"))
		return
	}
	total, _ := d.bound()
	if mode == modeAfterAccept {
		// This process is as good as dead once the answer is out: nothing
		// it serves from now on could be trusted to survive (CodeRestarting).
		d.dying.Store(true)
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, http.StatusCreated, map[string]any{"runId": run.ID, "mode": mode, "recoveryClass": recoveryClass, "recoveryBoundMs": total})
	if mode == modeAfterAccept {
		// The answer is on its way (flushed); the process dies before the
		// held run is ever dispatched.
		go func() {
			time.Sleep(200 * time.Millisecond)
			d.restart.Kill()
		}()
		return
	}
	// The seam starts it itself, the only start the hold lets through (the
	// runs stream's delivery stays held), so one executor drives it to its
	// first node.started, where the process dies.
	d.mu.Lock()
	d.killAt[run.ID] = true
	d.mu.Unlock()
	go func() { _ = d.execute(context.WithValue(context.Background(), seamStart{}, run.ID), run.ID) }()
}

// duplicate stages duplicate-delivery: one webhook run whose one effect
// posts to effectURL, delivered to the executor twice more, concurrently,
// beside the runs stream's own delivery.
func (d *durability) duplicate(w http.ResponseWriter, r *http.Request, tenant, effectURL string) {
	if !absoluteURL(effectURL) {
		writeEnvelope(w, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "effectUrl is required and must be an absolute URI").
			WithDetails(map[string]any{"field": "effectUrl"}))
		return
	}
	if err := d.policy.CheckURL(effectURL); err != nil {
		writeEnvelope(w, apierr.New(http.StatusBadRequest, apierr.CodeWebhookURLRejected, "%s", err.Error()))
		return
	}
	inputs, _ := json.Marshal(map[string]any{"url": effectURL, "payload": map[string]any{"seam": modeDuplicateDelivery}})
	run := runs.NewRun(tenant, webhook.WorkflowWebhook, inputs, time.Now())
	if err := d.runs.Create(r.Context(), run); err != nil {
		writeEnvelope(w, apierr.New(http.StatusInternalServerError, "internal_error", "internal error"))
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"runId": run.ID, "mode": modeDuplicateDelivery})
	for range 2 {
		go func() { _ = d.execute(context.Background(), run.ID) }()
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// CodeRestarting is the (vendor) error code of the 503 a process answers
// once the durability seam has decided to kill it (after-accept: the kill
// lands a moment after the answer, so that the answer reaches the client
// whole). Until the supervisor's new process serves, nothing is served:
// not discovery, which would tell a client the service is back, nor a
// second exercise, which would be staged on a process about to die.
const CodeRestarting = "idemkit.restarting"
