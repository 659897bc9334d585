package devstack

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
)

// devSSEKeepAlive is how often a held event stream carries a keep-alive
// comment (events.md §SSE frames: at least every 30 s).
const devSSEKeepAlive = 15 * time.Second

// devSSEReread is how often a held event stream re-reads its run for
// later events (one run read each, as a reconnect with Last-Event-ID).
const devSSEReread = 500 * time.Millisecond

// heldComment opens a held stream in place of the api's comment (which
// asks an EventSource to reconnect for later events).
const heldComment = ": the stream stays open until the run ends; later events follow as they are recorded\n"

// streamCloser ends every held event stream when the server stops, so a
// stop does not wait out its grace for streams that would never end by
// themselves (their clients reconnect with Last-Event-ID).
type streamCloser struct {
	once sync.Once
	done chan struct{}
}

func newStreamCloser() *streamCloser { return &streamCloser{done: make(chan struct{})} }

// close ends the held streams (http.Server.RegisterOnShutdown).
func (s *streamCloser) close() { s.once.Do(func() { close(s.done) }) }

// closed is nil (never ready) for a gateway without a closer.
func (s *streamCloser) closed() <-chan struct{} {
	if s == nil {
		return nil
	}
	return s.done
}

// holdsStream says whether the answer resp to r is the event stream of a
// live run, which `idemkit dev` holds open: a GET of streamRunEvents
// answered 200 text/event-stream whose body carries the `retry:` hint the
// api gives only while the run is not terminal. A HEAD, an error, a
// terminal run's stream (closed after its terminal event) are answered as
// the api answered them.
func holdsStream(r *http.Request, rawPath string, resp events.APIGatewayV2HTTPResponse) bool {
	if r.Method != http.MethodGet || resp.StatusCode != http.StatusOK || resp.Headers["Content-Type"] != "text/event-stream" || resp.IsBase64Encoded {
		return false
	}
	m, _, found, _ := apifn.MatchRoute(r.Method, rawPath)
	return found && m.Route.Op == "streamRunEvents" && live(resp.Body)
}

// live says whether an events answer is a live run's (it carries the
// `retry:` field).
func live(body string) bool {
	return strings.HasPrefix(body, "retry:") || strings.Contains(body, "\nretry:")
}

// sseBlocks splits an events answer into its frames (each with its id)
// and drops its comments and `retry:` field.
func sseBlocks(body string) (frames []string, ids []int64) {
	for _, blk := range strings.Split(body, "\n\n") {
		var id int64 = -1
		var keep []string
		for _, line := range strings.Split(blk, "\n") {
			switch {
			case line == "" || strings.HasPrefix(line, ":") || strings.HasPrefix(line, "retry:"):
			case strings.HasPrefix(line, "id: "):
				id, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
				keep = append(keep, line)
			default:
				keep = append(keep, line)
			}
		}
		if id >= 0 && len(keep) > 0 {
			frames, ids = append(frames, strings.Join(keep, "\n")+"\n\n"), append(ids, id)
		}
	}
	return frames, ids
}

// holdStream answers a live run's event stream (holdsStream) and keeps it
// open: the api's frames first, after a comment saying the stream stays
// open and the `retry:` hint (for a reconnect), then every keep-alive
// period a comment, and every re-read period the api's answer to the same
// request resumed after the last frame sent (Last-Event-ID), whose new
// frames follow. It closes after the frames of the answer that finds the
// run terminal (its terminal event among them, unless the stream's mode or
// cursor leaves it out), when a re-read is not a 200 stream, when the
// client hangs up and when the server stops (g.streams).
func (g *gateway) holdStream(w http.ResponseWriter, r *http.Request, ev events.APIGatewayV2HTTPRequest, first events.APIGatewayV2HTTPResponse, reqID string) {
	keepAlive, reread := g.sseKeepAlive, g.sseReread
	if keepAlive <= 0 {
		keepAlive = devSSEKeepAlive
	}
	if reread <= 0 {
		reread = devSSEReread
	}
	rc := http.NewResponseController(w)
	// The body is read: the server's ReadTimeout, which counts from the
	// request, is lifted for the rest of the stream.
	_ = rc.SetReadDeadline(time.Time{})
	// The server's WriteTimeout counts from the request: each write moves
	// the deadline on, past the next keep-alive.
	write := func(s string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(keepAlive + 30*time.Second))
		if _, err := w.Write([]byte(s)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// The client's Last-Event-ID, which the api accepted (a non-negative
	// integer, however wide: one past int64 is past every log).
	last := int64(-1)
	if v, ok := ev.Headers["last-event-id"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if errors.Is(err, strconv.ErrRange) {
			n, err = math.MaxInt64, nil
		}
		if err == nil {
			last = n
		}
	}
	// send writes the frames of an answer: all of the first (the api
	// resumed it after the client's Last-Event-ID; a values-mode snapshot
	// is sent on resumption too), of a re-read those after the last sent.
	send := func(body string, all bool) bool {
		var out bytes.Buffer
		frames, ids := sseBlocks(body)
		for i, f := range frames {
			if all || ids[i] > last {
				out.WriteString(f)
				last = max(last, ids[i])
			}
		}
		return out.Len() == 0 || write(out.String())
	}
	w.WriteHeader(http.StatusOK)
	if !write(heldComment+"retry: "+strconv.Itoa(apifn.EventsRetryMs)+"\n\n") || !send(first.Body, true) {
		return
	}
	keep := time.NewTicker(keepAlive)
	defer keep.Stop()
	next := time.NewTicker(reread)
	defer next.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-g.streams.closed():
			return
		case <-keep.C:
			if !write(": keep-alive\n\n") {
				return
			}
		case <-next.C:
			if last >= 0 {
				ev.Headers["last-event-id"] = strconv.FormatInt(last, 10)
			}
			// Each re-read stands for a reconnect, which passes the
			// authorizer behind API Gateway: a key revoked since the
			// stream opened ends it once its kept decision expires.
			if ok, denied := g.reauthorize(r.Context(), &ev, reqID); !ok {
				if denied {
					_ = write(revokedComment)
				}
				return
			}
			resp, err := g.reread(r.Context(), ev, reqID)
			if err != nil || resp.StatusCode != http.StatusOK || resp.Headers["Content-Type"] != "text/event-stream" {
				return
			}
			if !send(resp.Body, false) || !live(resp.Body) {
				return
			}
		}
	}
}

// revokedComment ends a held stream whose key the authorizer no longer
// grants; the client's reconnect is answered 401.
const revokedComment = ": the API key is no longer accepted; the stream closes (a reconnect is answered 401)\n\n"

// reauthorize asks the authorizer about ev again, as API Gateway does on
// each reconnect (g.authCache keeps its decisions for the authorizer TTL),
// under a request deadline of its own, and sets the context it grants on
// ev. ok is false when it refuses (denied) or fails: the stream closes.
func (g *gateway) reauthorize(parent context.Context, ev *events.APIGatewayV2HTTPRequest, reqID string) (ok, denied bool) {
	if g.auth == nil {
		return true, false
	}
	ctx, cancel := g.invocation(parent, reqID)
	defer cancel()
	res, err := g.authorize(ctx, *ev)
	if errors.Is(err, authfn.ErrUnauthorized) || err == nil && !res.IsAuthorized {
		return false, true
	}
	if err != nil {
		return false, false
	}
	ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: res.Context}
	return true, false
}

// reread asks the api for ev again under a request deadline of its own,
// as one more invocation.
func (g *gateway) reread(parent context.Context, ev events.APIGatewayV2HTTPRequest, reqID string) (events.APIGatewayV2HTTPResponse, error) {
	ctx, cancel := g.invocation(parent, reqID)
	defer cancel()
	return g.api.Handle(ctx, ev)
}
