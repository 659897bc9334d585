package apifn

import (
	"strings"
	"testing"
)

// TestContentCodingRefused415: a body sent with a content coding this host
// does not decode (gzip, br, anything but identity) is 415
// unsupported_media_type with Accept-Encoding: identity (RFC 9110 §15.5.16,
// §12.5.3) on every route that reads a body, before anything runs — never
// 400 "not valid JSON", which blames the client's JSON; identity, or no
// coding, is read as before, and a coding on an empty body refuses nothing.
func TestContentCodingRefused415(t *testing.T) {
	f := newFixture(t)
	gz := "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
	for _, coding := range []string{"gzip", "GZIP", "br", "deflate", "identity, gzip", "x-custom"} {
		for _, c := range []struct{ method, path, key, body string }{
			{"POST", "/runs", key1, gz},
			{"POST", "/runs", "", gz},
			{"POST", "/runs/acme~2Fabcdefghijklmnopqr/cancel", key1, gz},
			{"POST", "/runs/acme~2Fabcdefghijklmnopqr/retry", key1, gz},
			{"POST", "/runs/acme~2Fabcdefghijklmnopqr:fork", key1, gz},
		} {
			e := ev(c.method, c.path, "acme", c.key, c.body)
			e.Headers["content-encoding"] = coding
			r, m := f.do(t, e)
			if r.StatusCode != 415 || m["error"] != "unsupported_media_type" || !strings.Contains(m["message"].(string), "Content-Encoding") ||
				r.Headers["Accept-Encoding"] != "identity" {
				t.Errorf("Content-Encoding %q on %s %s: %d %v %s", coding, c.method, c.path, r.StatusCode, r.Headers, r.Body)
			}
		}
		w := testWorkOrderReq("application/json", gz, map[string]string{"content-encoding": coding})
		if r, m := f.do(t, w); r.StatusCode != 415 || m["error"] != "unsupported_media_type" {
			t.Errorf("Content-Encoding %q on the work-order test route: %d %s", coding, r.StatusCode, r.Body)
		}
	}
	for _, coding := range []string{"identity", "Identity", ""} {
		e := ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop"}`)
		e.Headers["content-encoding"] = coding
		if r, _ := f.do(t, e); r.StatusCode != 201 {
			t.Errorf("Content-Encoding %q on a JSON create: %d %s", coding, r.StatusCode, r.Body)
		}
	}
	e := ev("POST", "/runs/acme~2Fabcdefghijklmnopqr/cancel", "acme", key1, "")
	e.Headers["content-encoding"] = "gzip"
	if r, _ := f.do(t, e); r.StatusCode == 415 {
		t.Errorf("Content-Encoding gzip on an empty cancel body: %d %s", r.StatusCode, r.Body)
	}
}
