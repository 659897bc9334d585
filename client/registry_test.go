package client

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

// The client retries a server error only when OpenWOP's error registry
// says its code is retriable: an answer with a code the registry marks
// not retriable (a 500 the same request will meet again, a 501) is final,
// not retried until MaxAttempts. Every retriable 5xx and 429 code is
// retried. A 4xx other than 429 is final whatever the registry says (the
// client's documented rule), except the in-flight 409, which is polled.
func TestServerErrorsFollowTheRegistry(t *testing.T) {
	b, err := os.ReadFile(shared.Path(t, "openwop", "spec", "v2", "errors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		Rows []struct {
			Code       string `json:"code"`
			HTTPStatus int    `json:"httpStatus"`
			Retriable  bool   `json:"retriable"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(b, &reg); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, row := range reg.Rows {
		if row.HTTPStatus < 500 && row.HTTPStatus != http.StatusTooManyRequests {
			continue
		}
		resp := &http.Response{StatusCode: row.HTTPStatus, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"error":"` + row.Code + `","message":"m"}`))}
		want := final
		if row.Retriable {
			want = retryable
		}
		if got, _ := classify(resp, DefaultInFlightCodes); got != want {
			t.Errorf("%d %s (registry: retriable %v): verdict %d, want %d", row.HTTPStatus, row.Code, row.Retriable, got, want)
		}
		if body, _ := io.ReadAll(resp.Body); !strings.Contains(string(body), row.Code) {
			t.Errorf("%s: the body is not readable from the start after classify: %q", row.Code, body)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("the registry has no 5xx or 429 row")
	}
	// A server error without an envelope (a proxy's 502 page) is retried.
	for _, status := range []int{500, 502, 503, 504} {
		resp := &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader("<html>bad gateway</html>"))}
		if got, _ := classify(resp, DefaultInFlightCodes); got != retryable {
			t.Errorf("%d without an envelope: verdict %d, want retryable", status, got)
		}
	}
}
