package decided_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem/decided"
	"github.com/idemkit/idemkit/idem/memstore"
)

// history returns an in-memory history holding order o1 of tenant acme at
// version 1 {status: open, note: ""}.
func history(t *testing.T) *memstore.History {
	t.Helper()
	h := memstore.NewHistory()
	if v, err := h.Write("acme", "o1", map[string]any{"status": "open", "note": ""}); err != nil || v != 1 {
		t.Fatalf("create: %d %v", v, err)
	}
	return h
}

func TestOfflineDecisionRunsWhenOnlyUnrelatedFieldsChanged(t *testing.T) {
	h := history(t)
	if _, err := h.Write("acme", "o1", map[string]any{"note": "gift wrap"}); err != nil {
		t.Fatal(err)
	}
	d := decided.Checker{History: h, Inputs: []string{"status"}}
	cur, err := d.Check(context.Background(), "acme", "o1", 1)
	if err != nil || cur != 2 {
		t.Fatalf("Check = %d, %v; want 2, nil", cur, err)
	}
	// Decided against the current version: nothing changed at all.
	if cur, err := d.Check(context.Background(), "acme", "o1", 2); err != nil || cur != 2 {
		t.Fatalf("Check(current) = %d, %v", cur, err)
	}
}

func TestOfflineDecisionRefusedWithAFixWhenAnInputChanged(t *testing.T) {
	h := history(t)
	for _, f := range []map[string]any{{"status": "paid"}, {"note": "x"}, {"status": "shipped", "note": "y"}} {
		if _, err := h.Write("acme", "o1", f); err != nil {
			t.Fatal(err)
		}
	}
	d := decided.Checker{History: h, Inputs: []string{"status", "price"}}
	cur, err := d.Check(context.Background(), "acme", "o1", 1)
	var stale *decided.StaleError
	if !errors.As(err, &stale) || cur != 4 {
		t.Fatalf("Check = %d, %v; want a StaleDecisionError at version 4", cur, err)
	}
	if stale.Decided != 1 || stale.Current != 4 || stale.RecordID != "o1" || len(stale.Changes) != 1 {
		t.Fatalf("stale = %+v", stale)
	}
	c := stale.Changes[0]
	if c.Field != "status" || string(c.Old) != `"open"` || string(c.New) != `"shipped"` || c.Version != 4 {
		t.Fatalf("change = %+v (old %s new %s)", c, c.Old, c.New)
	}
	// The envelope carries the fix.
	stale.InboxID = "ib1"
	status, hdr, body := stale.Envelope()
	var env struct {
		Error   string `json:"error"`
		Message string `json:"message"`
		Details struct {
			RecordID       string                `json:"recordId"`
			DecidedVersion int64                 `json:"decidedVersion"`
			CurrentVersion int64                 `json:"currentVersion"`
			InboxID        string                `json:"inboxId"`
			Changes        []decided.FieldChange `json:"changes"`
		} `json:"details"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	if status != http.StatusConflict || hdr["Content-Type"] != "application/json" || env.Error != decided.CodeStale ||
		env.Details.CurrentVersion != 4 || env.Details.DecidedVersion != 1 || env.Details.InboxID != "ib1" ||
		len(env.Details.Changes) != 1 || string(env.Details.Changes[0].Old) != `"open"` || env.Message == "" {
		t.Fatalf("envelope %d %v %s", status, hdr, body)
	}
	// Decided again against the current version: it runs.
	if _, err := d.Check(context.Background(), "acme", "o1", 4); err != nil {
		t.Fatalf("re-decided: %v", err)
	}
}

func TestOfflineDecisionInputChangedBackStillRefused(t *testing.T) {
	h := history(t)
	_, _ = h.Write("acme", "o1", map[string]any{"status": "paid"})
	_, _ = h.Write("acme", "o1", map[string]any{"status": "open"})
	_, err := decided.Checker{History: h, Inputs: []string{"status"}}.Check(context.Background(), "acme", "o1", 1)
	var stale *decided.StaleError
	if !errors.As(err, &stale) || string(stale.Changes[0].Old) != `"open"` || string(stale.Changes[0].New) != `"open"` {
		t.Fatalf("a touched input is a change even when its value came back: %v", err)
	}
}

func TestOfflineDecisionUnknownRecordOrVersion(t *testing.T) {
	h := history(t)
	d := decided.Checker{History: h, Inputs: []string{"status"}}
	ctx := context.Background()
	if _, err := d.Check(ctx, "globex", "o1", 1); !errors.Is(err, decided.ErrRecordNotFound) {
		t.Fatalf("another scope's record: %v", err)
	}
	for _, v := range []int64{0, -1, 2} {
		if _, err := d.Check(ctx, "acme", "o1", v); !errors.Is(err, decided.ErrVersionAhead) {
			t.Fatalf("version %d: %v", v, err)
		}
	}
	if _, err := (decided.Checker{History: h}).Check(ctx, "acme", "o1", 1); err == nil {
		t.Fatal("a check without inputs must be refused")
	}
}

func TestParseDecidedVersion(t *testing.T) {
	if _, present, err := decided.ParseVersion(nil); present || err != nil {
		t.Fatal("absent header")
	}
	if v, present, err := decided.ParseVersion([]string{"42"}); v != 42 || !present || err != nil {
		t.Fatalf("42: %d %v %v", v, present, err)
	}
	for _, bad := range [][]string{{""}, {"0"}, {"007"}, {"-1"}, {"+1"}, {" 1"}, {"1.0"}, {"1e3"}, {"1234567890123456"}, {"1", "2"}, {"٣"}} {
		if _, present, err := decided.ParseVersion(bad); !present || !errors.Is(err, decided.ErrVersionInvalid) {
			t.Fatalf("%q accepted", bad)
		}
	}
}

// TestDecidedMiddleware applies the check around a handler: unchecked
// without the header, the handler runs when the check passes, and a stale
// decision is refused (the handler never runs) after OnStale kept it.
func TestDecidedMiddleware(t *testing.T) {
	h := history(t)
	_, _ = h.Write("acme", "o1", map[string]any{"status": "paid"})
	ran := 0
	next := func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		ran++
		return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
	}
	kept := 0
	wrapped := decided.Checker{History: h, Inputs: []string{"status"}}.HTTPAPI(
		func(_ context.Context, ev events.APIGatewayV2HTTPRequest) (string, string, bool) {
			return ev.RequestContext.AccountID, "o1", true
		},
		func(_ context.Context, _ events.APIGatewayV2HTTPRequest, e *decided.StaleError) error {
			kept++
			e.InboxID = "kept-1"
			return nil
		}, next)
	call := func(tenant, version string) events.APIGatewayV2HTTPResponse {
		ev := events.APIGatewayV2HTTPRequest{Headers: map[string]string{}}
		ev.RequestContext.AccountID = tenant
		if version != "" {
			ev.Headers["idempotency-decided-version"] = version
		}
		r, err := wrapped(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := call("acme", ""); r.StatusCode != 200 || ran != 1 {
		t.Fatalf("no header: %d", r.StatusCode)
	}
	if r := call("acme", "2"); r.StatusCode != 200 || ran != 2 {
		t.Fatalf("current version: %d", r.StatusCode)
	}
	r := call("acme", "1")
	var env map[string]any
	_ = json.Unmarshal([]byte(r.Body), &env)
	if r.StatusCode != 409 || ran != 2 || kept != 1 || env["error"] != decided.CodeStale ||
		env["details"].(map[string]any)["inboxId"] != "kept-1" {
		t.Fatalf("stale: %d %s (ran %d, kept %d)", r.StatusCode, r.Body, ran, kept)
	}
	for _, c := range []struct {
		tenant, version string
		status          int
	}{{"acme", "x", 400}, {"acme", "3", 400}, {"globex", "1", 404}} {
		if r := call(c.tenant, c.version); r.StatusCode != c.status || ran != 2 {
			t.Fatalf("%+v: %d %s", c, r.StatusCode, r.Body)
		}
	}
	// A version the record never had, sent as If-Match alone: the refusal
	// names If-Match, the header the request sent.
	ev := events.APIGatewayV2HTTPRequest{Headers: map[string]string{"if-match": `"3"`}}
	ev.RequestContext.AccountID = "acme"
	r, _ = wrapped(context.Background(), ev)
	env = nil
	_ = json.Unmarshal([]byte(r.Body), &env)
	if d, _ := env["details"].(map[string]any); r.StatusCode != 400 || d["field"] != decided.HeaderIfMatch || ran != 2 {
		t.Fatalf("If-Match ahead: %d %s", r.StatusCode, r.Body)
	}
}

// TestParseStampedETag: If-Match may carry a stamped tag ("7.stamp"), a
// representation's tag that begins with its version; Parse reads that
// version, and refuses a tag whose version part is malformed or that
// disagrees with Header.
func TestParseStampedETag(t *testing.T) {
	const tag = `"7.Xy_z-1"`
	if v, present, err := decided.Parse(nil, []string{tag}); v != 7 || !present || err != nil {
		t.Fatalf("If-Match %s: %d %v %v", tag, v, present, err)
	}
	if v, _, err := decided.Parse([]string{"7"}, []string{tag}); v != 7 || err != nil {
		t.Fatalf("agreeing with the header: %d %v", v, err)
	}
	for _, bad := range []string{`"7."`, `".x"`, `"07.x"`, `"x.7"`, `W/"7.x"`} {
		if _, _, err := decided.Parse(nil, []string{bad}); !errors.Is(err, decided.ErrIfMatchInvalid) {
			t.Fatalf("If-Match %s: %v, want ErrIfMatchInvalid", bad, err)
		}
	}
	if _, _, err := decided.Parse([]string{"6"}, []string{tag}); !errors.Is(err, decided.ErrIfMatchInvalid) {
		t.Fatalf("disagreeing with the header: %v", err)
	}
}

// TestIfMatchListOfStampedTagsIsInvalid: a list of entity tags in one
// If-Match line is refused, as a list of plain tags is, even when its
// first tag is a stamped one ("2.x", "9"): it was read as the one tag
// `"2.x", "9"`, its version the digits before the first dot, so the
// write was checked against version 2 (RED_TEAM 245). An entity tag holds
// no double quote, space or control character inside (RFC 9110 §8.8.3).
func TestIfMatchListOfStampedTagsIsInvalid(t *testing.T) {
	for _, bad := range []string{`"2.x", "9"`, `"2.x","9"`, `"2.x", *`, `"2.a b"`, "\"2.a\tb\"", `"2.a"b"`, `"9", "2.x"`} {
		if v, _, err := decided.Parse(nil, []string{bad}); !errors.Is(err, decided.ErrIfMatchInvalid) {
			t.Errorf("If-Match %s: version %d, %v; want ErrIfMatchInvalid", bad, v, err)
		}
	}
	for _, good := range []string{`"2.Xy_z-1"`, `"2.~!#$%&'()*+,/:;<=>?@[]^{|}"`, `"2"`} {
		if v, _, err := decided.Parse(nil, []string{good}); v != 2 || err != nil {
			t.Errorf("If-Match %s: version %d, %v; want 2", good, v, err)
		}
	}
}
