package apifn

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/apierr"
)

// DefaultPollMaxWait is Config.PollMaxWait's default: the longest a
// pollRunEvents request waits for an event, whatever its timeout asks.
// Behind an HTTP API, whose Lambda integration answers within 29 s, it
// leaves the invocation room for its last read and its answer.
const DefaultPollMaxWait = 20 * time.Second

// The long poll's re-reads: the first after pollFirstStep, each next one
// after twice the pause before it, at most pollMaxStep; the wait ends
// pollDeadlineMargin before the request's deadline (a Lambda invocation's),
// so the last read and the answer still fit in it.
const (
	pollFirstStep      = 250 * time.Millisecond
	pollMaxStep        = 2 * time.Second
	pollDeadlineMargin = 2 * time.Second
)

// pollEvents serves GET /runs/{runId}/events/poll (pollRunEvents): the
// run's events with sequence > afterSequence (all when absent), as one JSON
// answer {runId, events, lastSequence, status, isTerminal}.
//
// It is a long poll. When the log has events after the cursor, or the run
// is terminal, it answers at once. Otherwise it waits, re-reading the run
// (one GetItem each) after 250 ms, 500 ms, 1 s and then every 2 s, and
// answers as soon as a read finds an event after the cursor or a terminal
// run, or, with no events, when the wait ends: after timeout seconds
// (1..60, default 30), at most Config.PollMaxWait (DefaultPollMaxWait), and
// pollDeadlineMargin before the request's deadline, and at once when
// TestConfig.PollWaitEnds is closed (`idemkit dev` stops). A HEAD answers at once
// (it carries no events). A client that hangs up ends the wait (499, as
// on every route). streamMode is accepted, and refused, as on
// streamRunEvents (400 unsupported_stream_mode with details.supported) and
// does not filter: every recorded event is a debug-mode event.
func (h *Handler) pollEvents(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	params, err := queryParams(c.ev)
	if err != nil {
		return errResp(apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the query string is malformed")), nil
	}
	after := int64(-1)
	if vs, ok := params["afterSequence"]; ok {
		n, ok := parseCursor(vs[0])
		if len(vs) != 1 || !ok {
			return errResp(validation("afterSequence", "afterSequence must be a non-negative integer")), nil
		}
		after = n
	}
	timeout := 30 * time.Second
	if vs, ok := params["timeout"]; ok {
		n, ok := parseBounded(vs[0], 1, 60)
		if len(vs) != 1 || !ok {
			return errResp(validation("timeout", "timeout must be an integer 1..60 (seconds)")), nil
		}
		timeout = time.Duration(n) * time.Second
	}
	if vs, ok := params["streamMode"]; ok {
		if _, ok := parseModes(vs); !ok {
			return errResp(unsupportedStreamMode()), nil
		}
	}
	r, err := h.cfg.Runs.Get(ctx, c.runID())
	if errors.Is(err, runs.ErrRunNotFound) || (err == nil && r.Tenant != c.tenant) {
		return notFound(), nil
	}
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	all, evs := eventsAfter(r, after)
	if c.ev.RequestContext.HTTP.Method != http.MethodHead {
		wait := min(timeout, h.pollMaxWait())
		dl, hasDeadline := ctx.Deadline()
		if hasDeadline {
			wait = min(wait, dl.Sub(h.clock.Now())-pollDeadlineMargin)
		}
		// The wait also ends when the host stops (TestConfig.PollWaitEnds):
		// its sleeps run under waitCtx, which that ends; a cancelled ctx
		// (the client hung up) is still told apart below.
		waitCtx, endWait := context.WithCancel(ctx)
		defer endWait()
		if ends := h.cfg.Test.PollWaitEnds; ends != nil {
			go func() {
				select {
				case <-ends:
					endWait()
				case <-waitCtx.Done():
				}
			}()
		}
		for waited, step := time.Duration(0), pollFirstStep; len(evs) == 0 && !r.Status.Terminal(); step = min(2*step, pollMaxStep) {
			d := min(step, wait-waited)
			if hasDeadline { // slow reads count too
				d = min(d, dl.Sub(h.clock.Now())-pollDeadlineMargin)
			}
			if d <= 0 {
				break
			}
			if err := h.clock.Sleep(waitCtx, d); err != nil {
				if errors.Is(ctx.Err(), context.Canceled) {
					return events.APIGatewayV2HTTPResponse{}, err
				}
				break // the deadline came early, or the host stops: answer what was read
			}
			waited += d
			if r, err = h.cfg.Runs.Get(ctx, c.runID()); errors.Is(err, runs.ErrRunNotFound) {
				return notFound(), nil // expired while waited on
			} else if err != nil {
				return events.APIGatewayV2HTTPResponse{}, err
			}
			all, evs = eventsAfter(r, after)
		}
	}
	return jsonResp(http.StatusOK, map[string]any{"runId": r.ID, "events": evs, "lastSequence": all[len(all)-1].Sequence,
		"status": r.Status, "isTerminal": r.Status.Terminal()})
}

// pollMaxWait is the longest a poll waits: Config.PollMaxWait, else
// DefaultPollMaxWait; a negative one does not wait.
func (h *Handler) pollMaxWait() time.Duration {
	switch w := h.cfg.PollMaxWait; {
	case w == 0:
		return DefaultPollMaxWait
	case w < 0:
		return 0
	default:
		return w
	}
}

// eventsAfter returns r's events and those of them with sequence > after
// (never nil).
func eventsAfter(r runs.Run, after int64) (all, evs []RunEvent) {
	all = RunEvents(r)
	evs = []RunEvent{}
	for _, e := range all {
		if e.Sequence > after {
			evs = append(evs, e)
		}
	}
	return all, evs
}

// effectSeams serves GET /host/effect-seams (getEffectSeamManifest): the
// host's effect-seam manifest (settings.EffectSeamManifest).
func (h *Handler) effectSeams(_ context.Context, _ call) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Body: string(h.seams),
		Headers: map[string]string{"Content-Type": "application/json"}}, nil
}
