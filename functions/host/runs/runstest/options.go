package runstest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// LargestBody is the largest createRun body the reference host accepts
// (apifn.MaxBodyBytes, held equal by the api's tests): a run's stored
// RunOptions and inputs, taken from that body, never exceed it together.
const LargestBody = 256 << 10

// someOptions are RunOptions with values whose form a decoder would change
// (a number's spelling, an escape, key order, a null, a big integer).
func someOptions() runs.Options {
	return runs.Options{
		Configurable: json.RawMessage(`{"version":1,"run":{"runTimeoutMs":60000,"escalationThreshold":0.50},"extensions":{"acme":{"z":1,"a":null}}}`),
		Tags:         json.RawMessage(`["a","\u00e9t\u00e9","",  "a"]`),
		Metadata:     json.RawMessage(`{"z":[1,2.50,1e2,{"n":null}],"big":123456789012345678901234567890,"s":"<&>"}`),
	}
}

func sameOptions(got, want runs.Options) bool {
	return bytes.Equal(got.Configurable, want.Configurable) && bytes.Equal(got.Tags, want.Tags) && bytes.Equal(got.Metadata, want.Metadata)
}

// createKeepsOptions: a run's RunOptions read back byte for byte as
// written, and stay so through every later write (configurable never
// changes after creation); a run created without them reads back with
// none.
func createKeepsOptions(t *testing.T, e *env) {
	r := runs.NewRun("acme", "webhook", nil, e.now)
	r.Options = someOptions()
	if err := e.st.Create(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, r.ID); !sameOptions(got.Options, r.Options) {
		t.Fatalf("read back options %s %s %s, wrote %s %s %s", got.Options.Configurable, got.Options.Tags, got.Options.Metadata,
			r.Options.Configurable, r.Options.Tags, r.Options.Metadata)
	}
	if _, err := e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", e.at(1*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.NoteFailure(e.ctx, r.ID, "transient", e.at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Schedule(e.ctx, r.ID, runs.Wake{At: e.at(3 * time.Second), Attempt: 1, MaxAttempts: 3}, e.at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusRunning}, runs.StatusCompleted, "", e.at(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, r.ID); !sameOptions(got.Options, r.Options) || got.Status != runs.StatusCompleted {
		t.Fatalf("after the run's writes: %s %s %s (%s)", got.Options.Configurable, got.Options.Tags, got.Options.Metadata, got.Status)
	}
	plain := e.newRun(t, 0)
	if got := e.get(t, plain.ID); got.Options.Configurable != nil || got.Options.Tags != nil || got.Options.Metadata != nil {
		t.Fatalf("a run created without options reads back with %+v", got.Options)
	}
}

// createLargestOptions: a run whose metadata fills the largest body the
// host accepts is stored (it fits DynamoDB's 400 KB item) and reads back
// unchanged, and the run's later writes still fit.
func createLargestOptions(t *testing.T, e *env) {
	const frame = `{"pad":""}`
	r := runs.NewRun("acme", "webhook", nil, e.now)
	r.Options.Metadata = json.RawMessage(`{"pad":"` + strings.Repeat("x", LargestBody-len(frame)) + `"}`)
	if len(r.Options.Metadata) != LargestBody {
		t.Fatalf("metadata of %d bytes, want %d", len(r.Options.Metadata), LargestBody)
	}
	if err := e.st.Create(e.ctx, r); err != nil {
		t.Fatalf("create with %d bytes of metadata: %v", LargestBody, err)
	}
	if _, err := e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", e.at(1*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.NoteFailure(e.ctx, r.ID, strings.Repeat("e", 1024), e.at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusRunning}, runs.StatusFailed, strings.Repeat("f", 1024), e.at(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := e.get(t, r.ID); !bytes.Equal(got.Options.Metadata, r.Options.Metadata) {
		t.Fatalf("read back %d bytes of metadata, wrote %d", len(got.Options.Metadata), len(r.Options.Metadata))
	}
}
