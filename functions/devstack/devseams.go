package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/jsonerr"
)

// The conformance seams profile (openwop-conformance-seams-v2,
// ../shared/openwop/api/seams-v2.yaml) as `idemkit dev --conformance-seams`
// serves it. The deployed stack never does: the seams live only in this
// command, and only that flag mounts and advertises them.
const (
	seamsPrefix = "/conformance/seams/"
	// seamEffectRetry is forceEffectTransportRetry: one outbound effect to
	// providerUrl, retried at the transport layer.
	seamEffectRetry = "/conformance/seams/sample/test/idempotency/effect-retry"
)

// seamRunTimeout bounds how long the effect-retry seam waits for its run.
const seamRunTimeout = 30 * time.Second

// errForcedRetry is the transport failure forceEffectTransportRetry injects
// after the first try of its effect was sent.
var errForcedRetry = errors.New("conformance seam: response dropped to force a transport retry")

// forcedRetry is the webhook client's transport under --conformance-seams:
// a provider key armed by the effect-retry seam makes the first try of that
// effect fail at the transport layer AFTER the request was sent (its
// response is read and dropped; a try that fails by itself, e.g. a
// connection the provider cuts, counts as that failure). The webhook
// deliverer classifies it as it would a lost response (uncertain: the
// attempt becomes escaped) and retries under the same provider key, so the
// provider sees the SAME Idempotency-Key twice and the ledger records two
// attempts of one effect. Requests with any other key pass through.
type forcedRetry struct {
	base  http.RoundTripper
	mu    sync.Mutex
	armed map[string]bool
}

func (f *forcedRetry) arm(providerKey string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed[providerKey] = true
}

func (f *forcedRetry) take(providerKey string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	armed := f.armed[providerKey]
	delete(f.armed, providerKey)
	return armed
}

func (f *forcedRetry) RoundTrip(req *http.Request) (*http.Response, error) {
	if !f.take(req.Header.Get("Idempotency-Key")) {
		return f.base.RoundTrip(req)
	}
	resp, err := f.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return nil, errForcedRetry
}

// seams serves the seams of the profile idemkit implements.
type seams struct {
	runs   runs.RunStore
	policy webhook.WebhookPolicy
	force  *forcedRetry
	// fixtureURL is the host's fixture destination (fixtureReceiver).
	fixtureURL string
	// dur is the durability seam (devdurability.go).
	dur *durability
	// holds are the idempotency holds (devhold.go).
	holds *holds
}

// isSeamPath reports whether a raw path is in the seams' path space.
func isSeamPath(rawPath string) bool { return strings.HasPrefix(rawPath, seamsPrefix) }

// serve answers an authenticated request in the seams' path space: the
// effect-retry seam, or 404 not_found for a seam idemkit does not serve, or
// 405 for another method.
//
// ctx is the request's invocation context, under its deadline
// (--request-timeout): the effect-retry seam waits for its run within it.
func (s *seams) serve(ctx context.Context, w http.ResponseWriter, r *http.Request, rawPath, tenant string, body []byte) {
	if rawPath == seamIdemHold {
		s.holds.serve(w, r, tenant, body)
		return
	}
	if isDurabilityPath(rawPath) && s.dur != nil {
		s.dur.serve(w, r, rawPath, tenant, body)
		return
	}
	if rawPath == seamFireEffect && r.Method == http.MethodPost {
		s.fire(w, r, tenant, body)
		return
	}
	if rawPath != seamEffectRetry {
		writeEnvelope(w, apierr.New(http.StatusNotFound, apierr.CodeNotFound, "not found"))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeEnvelope(w, apierr.New(http.StatusMethodNotAllowed, "idemkit.method_not_allowed", "method not allowed; allowed: POST"))
		return
	}
	if e := seamBodyRefusal(r, body); e != nil {
		writeEnvelope(w, e)
		return
	}
	var in map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	var providerURL string
	if err := dec.Decode(&in); err != nil || in == nil || dec.More() {
		writeEnvelope(w, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the body must be a JSON object {providerUrl}"))
		return
	}
	for k := range in {
		if k != "providerUrl" {
			writeEnvelope(w, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "unknown field %q; the body is {providerUrl}", k).
				WithDetails(map[string]any{"field": k}))
			return
		}
	}
	if json.Unmarshal(in["providerUrl"], &providerURL) != nil || !absoluteURL(providerURL) {
		writeEnvelope(w, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "providerUrl is required and must be an absolute URI").
			WithDetails(map[string]any{"field": "providerUrl"}))
		return
	}
	if err := s.policy.CheckURL(providerURL); err != nil {
		writeEnvelope(w, apierr.New(http.StatusBadRequest, apierr.CodeWebhookURLRejected, "%s", err.Error()))
		return
	}
	inputs, err := json.Marshal(map[string]any{"url": providerURL, "payload": map[string]any{"seam": "forceEffectTransportRetry"}})
	if err != nil {
		writeEnvelope(w, apierr.New(http.StatusInternalServerError, "internal_error", "internal error"))
		return
	}
	run := runs.NewRun(tenant, webhook.WorkflowWebhook, inputs, time.Now())
	id, err := webhook.WebhookIdentity(run)
	if err != nil {
		writeEnvelope(w, apierr.New(http.StatusInternalServerError, "internal_error", "internal error"))
		return
	}
	// Armed before the run exists, so the executor's first try is forced.
	s.force.arm(id.ProviderKey)
	if err := s.runs.Create(ctx, run); err != nil {
		s.force.take(id.ProviderKey)
		writeEnvelope(w, apierr.New(http.StatusInternalServerError, "internal_error", "internal error"))
		return
	}
	// The executor (driven by the runs stream, as for any run) delivers the
	// effect; the seam answers once the run has ended, so the ledger read
	// that follows sees both attempts.
	if !s.awaitRunEnd(ctx, run.ID) {
		s.force.take(id.ProviderKey)
		// The run did not end within the request's deadline (a provider
		// that never answers): it is cancelled, so its delivery is not
		// retried for the webhook's hour, and the caller is told the host
		// could not do the work now, as for any request that outlives
		// its deadline.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_, err := s.runs.Cancel(cctx, run.ID, []runs.Status{runs.StatusPending, runs.StatusRunning}, "conformance-seam",
			"the effect-retry seam's run did not end within the request's deadline", time.Now())
		cancel()
		fate := "is cancelled"
		if err != nil {
			fate = "could not be cancelled: it may still be retrying its delivery"
		}
		w.Header().Set("Retry-After", "1")
		writeEnvelope(w, apierr.New(http.StatusServiceUnavailable, webhook.CodeRunnerUnavailable,
			"the seam's run did not end within the request's deadline; its run %s %s; retry after the Retry-After delay", run.ID, fate))
		return
	}
	out, _ := json.Marshal(map[string]string{"runId": run.ID, "effectId": id.EffectID})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("OpenWOP-Version", settings.ProtocolVersion)
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(out)
}

// seamBodyRefusal applies the run routes' body rules to a seam's body: a
// content coding other than identity, or a Content-Type that names a
// media type other than application/json (or +json) or a charset other
// than UTF-8, is 415 unsupported_media_type; a body that is not strict
// JSON text (a member named twice, a lone surrogate escape, a number no
// double holds) is 400 validation_error. Nil when the body may be read.
func seamBodyRefusal(r *http.Request, body []byte) *apierr.Error {
	for _, v := range r.Header.Values("Content-Encoding") {
		for _, coding := range strings.Split(v, ",") {
			if coding = strings.Trim(coding, " \t"); coding != "" && !strings.EqualFold(coding, "identity") {
				return apierr.New(http.StatusUnsupportedMediaType, apierr.CodeUnsupportedMediaType,
					"Content-Encoding %q is not supported: send the body uncoded (identity)", coding)
			}
		}
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
			return apierr.New(http.StatusUnsupportedMediaType, apierr.CodeUnsupportedMediaType, "the body must be application/json")
		}
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			return apierr.New(http.StatusUnsupportedMediaType, apierr.CodeUnsupportedMediaType, "the body must be UTF-8 JSON (charset=utf-8 or none)")
		}
	}
	if len(body) == 0 {
		return nil // the seam refuses it as a missing providerUrl
	}
	return jsonerr.Check(body)
}

func absoluteURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && u.Host != ""
}

// awaitRunEnd polls the run every 50 ms until it has ended (true), or
// seamRunTimeout or ctx (the request's deadline) runs out (false): a seam answers once the run it
// started has ended, so what the suite reads next sees all of it.
func (s *seams) awaitRunEnd(ctx context.Context, id string) bool {
	ctx, cancel := context.WithTimeout(ctx, seamRunTimeout)
	defer cancel()
	for {
		cur, err := s.runs.Get(ctx, id)
		if err == nil && cur.Status.Terminal() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}
