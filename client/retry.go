package client

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/internal/contentcoding"
)

// verdict is what the Transport does with one attempt's answer.
type verdict int

const (
	final     verdict = iota // return it to the caller
	retryable                // wait and try again, budget permitting
	inFlight                 // 409 in flight: poll again, budget permitting
)

// maxPeek bounds how much of a 409 body is read to find its error code.
const maxPeek = 64 << 10

// finalServerCodes are the error codes of server errors that OpenWOP's
// error registry (spec/v2/errors.json) marks not retriable: the same request
// meets them again, so an answer carrying one is returned at once instead
// of retried until MaxAttempts. TestServerErrorsFollowTheRegistry holds
// this list to the registry.
var finalServerCodes = map[string]bool{
	"event_type_unmapped":    true,
	"pack_load_failure":      true,
	"payload_unprojectable":  true,
	"credential_unavailable": true,
}

// classify decides whether resp is final. For a 409 and a 5xx it reads (up
// to maxPeek bytes of) the body to find the error code, and leaves
// resp.Body readable from the start. A 409 whose body breaks off before
// its code could be read (the connection dropped) never arrived whole: it
// is retryable, as a transport error is, since the same key and body
// answer the same 409 again if it was final. cut reports such a body (a
// 409 or 5xx whose body broke off), which a replay marker does not make
// final.
func classify(resp *http.Response, inFlightCodes []string) (v verdict, cut bool) {
	switch {
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusRequestTimeout:
		// A 408 invites the client to repeat the request (RFC 9110
		// §15.5.9): the server did not take it whole in time.
		return retryable, false
	case resp.StatusCode >= 500 && resp.StatusCode <= 599:
		code, whole := peekCode(resp)
		if whole && finalServerCodes[code] {
			return final, false
		}
		return retryable, !whole
	case resp.StatusCode == http.StatusConflict:
		code, whole := peekCode(resp)
		if !whole {
			return retryable, true
		}
		for _, c := range inFlightCodes {
			if code == c {
				return inFlight, false
			}
		}
		return final, false
	default:
		return final, false
	}
}

// peekCode returns the error code of an envelope body ({"error":"code"},
// {"code":"code"} or {"error":{"code":"code"}}), or "". whole is false when
// reading the body failed (it broke off): the code, if any, is unknown. It
// restores resp.Body.
func peekCode(resp *http.Response) (code string, whole bool) {
	head, whole := peek(resp)
	if !whole {
		return "", false
	}
	return ErrorCode(head), true
}

// peek returns up to maxPeek bytes of resp's body and restores resp.Body
// as sent; whole is false when reading it failed (it broke off). A body
// that is not JSON as it stands but carries a content coding the standard
// library reads (the caller asked for compressed answers with its own
// Accept-Encoding, so net/http left the body as sent; a gateway or a
// compression middleware outside the server's Guard compressed it) is
// returned decoded, up to maxPeek bytes: the answer's code is the same
// compressed or not, so it is retried, polled or final alike.
func peek(resp *http.Response) (head []byte, whole bool) {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil, true
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxPeek))
	resp.Body = &rejoined{Reader: io.MultiReader(bytes.NewReader(head), resp.Body), c: resp.Body}
	if err != nil {
		return head, false
	}
	if codings := strings.Join(resp.Header.Values("Content-Encoding"), ","); codings != "" && !resp.Uncompressed && !json.Valid(head) {
		if d, ok := contentcoding.Decode(head, codings, maxPeek); ok {
			head = d
		}
	}
	return head, true
}

// modeHeader is the request header by which a caller under the commerce
// policy says how a duplicate of a pending request waits; "async" asks
// for the pending action at once.
const modeHeader = "Idempotency-Mode"

// commerceReplayHeader is the commerce policy's replay marker; its
// pending answer carries it.
const commerceReplayHeader = "Idempotent-Replayed"

// pendingAnswer reports whether resp is the commerce policy's pending
// answer: 202 marked Idempotent-Replayed: true (the commerce policy's
// marker, not the OpenWOP or ERP policy's, under which a 202 replay is a
// handler's own stored answer) with the body
// {"status":"pending","requestId":…} and nothing else, which names no
// action (the first request under the key is still executing). It is the
// policy's in-flight answer, polled as a 409 idempotency_in_flight is,
// except for a request sent with Idempotency-Mode: async, whose caller
// asked for it at once. A 202 naming an action (a runId, links) is the
// action as it is now, final. whole is false when the body broke off.
func pendingAnswer(req *http.Request, resp *http.Response) (pending, whole bool) {
	if resp.StatusCode != http.StatusAccepted || !IsReplay(resp.Header, commerceReplayHeader) ||
		strings.EqualFold(strings.TrimSpace(headerValue(req.Header, modeHeader)), "async") {
		return false, true
	}
	head, whole := peek(resp)
	if !whole {
		return false, false
	}
	var body map[string]json.RawMessage
	if json.Unmarshal(head, &body) != nil || len(body) != 2 {
		return false, true
	}
	var status, requestID string
	if json.Unmarshal(body["status"], &status) != nil || json.Unmarshal(body["requestId"], &requestID) != nil {
		return false, true
	}
	return status == "pending" && requestID != "", true
}

// ErrorCode returns the error code of an error-envelope body: the "error"
// field of OpenWOP's {error, message, details?}, or a "code" field at the top
// level or under "error". It returns "" when there is none.
func ErrorCode(body []byte) string {
	var env struct {
		Error json.RawMessage `json:"error"`
		Code  string          `json:"code"`
	}
	if json.Unmarshal(body, &env) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(env.Error, &s) == nil && s != "" {
		return s
	}
	var nested struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(env.Error, &nested) == nil && nested.Code != "" {
		return nested.Code
	}
	return env.Code
}

type rejoined struct {
	io.Reader
	c io.Closer
}

func (r *rejoined) Close() error { return r.c.Close() }

// RetryAfter parses a Retry-After header value (delay-seconds or an
// HTTP-date, RFC 9110 §10.2.3) relative to now. ok is false when the value is
// absent or malformed; a date in the past yields 0. Delay-seconds are
// digits only (a fractional or signed value is malformed); more seconds than
// a Duration holds are the longest Duration of whole seconds (RFC 9111
// §1.2.2's rule for delta-seconds), never a malformed value. An HTTP-date is
// one of the three forms RFC 9110 §5.6.7 has a recipient accept:
// IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), the obsolete rfc850-date
// ("Sunday, 06-Nov-94 08:49:37 GMT", a two-digit year more than 50 years
// ahead of now being the most recent past year with those digits) and
// asctime-date ("Sun Nov  6 08:49:37 1994"), case sensitive, in GMT and to
// the second. Any other zone or offset, a fractional second, or another
// layout is malformed (a date read in another zone as GMT would be hours
// off); the day name is not checked against the date.
func RetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if strings.Trim(v, "0123456789") == "" {
		const maxSec = int64(1<<63-1) / int64(time.Second)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > maxSec { // only a range error: v is digits
			n = maxSec
		}
		return time.Duration(n) * time.Second, true
	}
	t, ok := httpDate(v, now)
	if !ok {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// httpDateForms are the layouts of RFC 9110 §5.6.7's HTTP-date, each with
// its day names: IMF-fixdate, rfc850-date, asctime-date.
var httpDateForms = []struct {
	layout string
	days   []string
}{
	{http.TimeFormat, shortDays},
	{"Monday, 02-Jan-06 15:04:05 GMT", []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}},
	{time.ANSIC, shortDays},
}

var shortDays = []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}

// httpDate parses v as an HTTP-date (see RetryAfter). time.Parse is more
// lenient than the grammar (any zone for the rfc850 layout's "GMT" in
// http.ParseTime, a fractional second, a one-digit day, names in any case),
// so a parse counts only when formatting the time again gives v back, the
// day name aside.
func httpDate(v string, now time.Time) (time.Time, bool) {
	for _, f := range httpDateForms {
		t, err := time.Parse(f.layout, v)
		if err != nil {
			continue
		}
		day, rest, _ := strings.Cut(v, " ")
		_, again, _ := strings.Cut(t.Format(f.layout), " ")
		day = strings.TrimSuffix(day, ",")
		if rest != again || !slices.Contains(f.days, day) {
			continue
		}
		if f.layout != http.TimeFormat && f.layout != time.ANSIC {
			// rfc850-date: the year of two digits that is not more than
			// 50 years ahead.
			limit := now.AddDate(50, 0, 0)
			t = t.AddDate(now.Year()/100*100+100+t.Year()%100-t.Year(), 0, 0)
			for t.After(limit) {
				t = t.AddDate(-100, 0, 0)
			}
		}
		return t, true
	}
	return time.Time{}, false
}

// backoff returns the wait before attempt n+1 after n attempts (n >= 1).
// The exponential backoff is equal jitter over
// d = min(MaxDelay, BaseDelay*2^(n-1)): uniformly random in [d/2, d). When
// the server sent Retry-After ra, the wait is the larger of that backoff and
// ra plus a jitter of up to min(BaseDelay, ra/10), so a crowd of clients told
// the same Retry-After does not return in lockstep, and a server that keeps
// answering "Retry-After: 0" still gets a growing backoff. The wait is never
// shorter than ra.
func backoff(c *Config, n int, ra time.Duration, haveRA bool) time.Duration {
	d := c.MaxDelay
	if n-1 < 62 {
		if e := c.BaseDelay << (n - 1); e > 0 && e < d && e>>(n-1) == c.BaseDelay {
			d = e
		}
	}
	wait := d/2 + time.Duration(c.Rand()*float64(d-d/2))
	if haveRA {
		w := ra
		if j := time.Duration(c.Rand() * float64(min(c.BaseDelay, ra/10))); j > 0 {
			w = ra + min(j, math.MaxInt64-ra) // saturate, never wrap below ra
		}
		wait = max(wait, w)
	}
	return wait
}
