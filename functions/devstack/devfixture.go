package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/apierr"
)

// fixtureReceiver is `idemkit dev`'s own fixture destination: the
// loopback HTTP receiver a side-effecting node of a graph fixture posts to
// when its run names no inputs.url. It answers 204 and counts the
// requests by Idempotency-Key (the provider key), so a test can read how
// often an effect reached the outside.
type fixtureReceiver struct {
	srv *http.Server
	url string
	mu  sync.Mutex
	by  map[string]int
}

// startFixtureReceiver listens on a free loopback port until ctx ends.
func startFixtureReceiver(ctx context.Context) (*fixtureReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &fixtureReceiver{url: "http://" + ln.Addr().String() + "/fixture", by: map[string]int{}}
	f.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
		f.mu.Lock()
		f.by[r.Header.Get("Idempotency-Key")]++
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = f.srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = f.srv.Close() }()
	return f, nil
}

// seamFireEffect is fireEffectSeam: run a workflow that drives one named
// effect-seam manifest row once.
const seamFireEffect = "/conformance/seams/sample/effect-seams/fire"

// fire serves fireEffectSeam: {seam, receiverUrl?}. The named row is
// driven inside a run: conformance.side-effect by a
// conformance-replay-side-effect run with no hold, webhook.deliver by a
// webhook run; each posts to receiverUrl, or to the host's fixture
// destination when absent. It answers 201 {runId} once the run has ended,
// so the ledger read that follows sees its attempt; 404 for a seam the
// manifest does not list.
func (s *seams) fire(w http.ResponseWriter, r *http.Request, tenant string, body []byte) {
	var in struct {
		Seam        string `json:"seam"`
		ReceiverURL string `json:"receiverUrl"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || in.Seam == "" {
		writeEnvelope(w, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the body must be a JSON object {seam, receiverUrl?}").
			WithDetails(map[string]any{"field": "seam"}))
		return
	}
	dest := in.ReceiverURL
	if dest != "" {
		if !absoluteURL(dest) || s.policy.CheckURL(dest) != nil {
			writeEnvelope(w, apierr.New(http.StatusBadRequest, apierr.CodeWebhookURLRejected, "receiverUrl is not a destination this host admits"))
			return
		}
	}
	var inputs map[string]any
	var wf string
	switch in.Seam {
	case webhook.SeamSideEffect:
		wf, inputs = webhook.WorkflowReplaySideEffect, map[string]any{"delayMs": 0}
		if dest != "" {
			inputs["url"] = dest
		}
	case webhook.SeamWebhookDeliver:
		if dest == "" {
			dest = s.fixtureURL
		}
		wf, inputs = webhook.WorkflowWebhook, map[string]any{"url": dest, "payload": map[string]any{"seam": in.Seam}}
	default:
		writeEnvelope(w, apierr.New(http.StatusNotFound, apierr.CodeNotFound, "no effect seam %q in %s", in.Seam, settings.EffectSeamsPath))
		return
	}
	raw, _ := json.Marshal(inputs)
	run := runs.NewRun(tenant, wf, raw, time.Now())
	if err := s.runs.Create(r.Context(), run); err != nil {
		writeEnvelope(w, apierr.New(http.StatusInternalServerError, "internal_error", "internal error"))
		return
	}
	if !s.awaitRunEnd(r.Context(), run.ID) {
		writeEnvelope(w, apierr.New(http.StatusInternalServerError, "internal_error", "the seam's run did not end within %s", seamRunTimeout))
		return
	}
	out, _ := json.Marshal(map[string]string{"runId": run.ID})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("OpenWOP-Version", settings.ProtocolVersion)
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(out)
}

// fixtureWebhook is the sender of the graph fixtures' side-effecting nodes
// that name no inputs.url: the kit's ledger, to dev's own loopback
// destination, each request passing the fence as the kit's webhook does
// (its Wrap: fence.Owner.Guard under CROSS_REGION=fenced-effects). The
// ledger takes a fencing token for every attempt; without the pass before
// the request, no pass is recorded, and an escaped attempt's next try is
// issued a token and sent again.
func fixtureWebhook(k *kit.Kit) *webhook.Webhook {
	w := &webhook.Webhook{Ledger: k.Ledger, Policy: webhook.WebhookPolicy{AllowLoopback: true}}
	if k.Webhook != nil {
		w.Wrap = k.Webhook.Wrap
	}
	return w
}
