package runs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/itemsize"
)

// maxItemBytes is DynamoDB's item size limit (400 KB).
const maxItemBytes = 400 * 1024

// TestLargestRunItemFits: a run whose RunOptions fill the largest createRun
// body (256 KiB: the body bounds inputs and RunOptions together), with a
// lastError and an error of 1 KiB and a version log of every tracked
// field, is an item within DynamoDB's 400 KB limit, with room for the
// node log of the built-in workflows.
func TestLargestRunItemFits(t *testing.T) {
	const body = 256 << 10
	now := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	r := NewRun("acme", "webhook", nil, now)
	r.Options.Metadata = json.RawMessage(`{"p":"` + strings.Repeat("x", body-len(`{"p":""}`)) + `"}`)
	r.Error, r.LastError, r.Failures, r.RetryOf = strings.Repeat("e", 1024), strings.Repeat("l", 1024), 3, NewRunID("acme")
	r = withFirstVersion(r)
	for _, v := range []map[string]json.RawMessage{version(FieldStatus, StatusRunning), version(fieldLastError, r.LastError), terminalVersion(StatusFailed, r.Error)} {
		r.History = appendVersion(r.History, v)
	}
	r.Version = r.History.Current()
	size := itemsize.Of(runItem(r))
	t.Logf("the largest run item: %d bytes (%d below the limit)", size, maxItemBytes-size)
	if size > maxItemBytes-64<<10 {
		t.Fatalf("the largest run item is %d bytes: less than 64 KiB below DynamoDB's %d", size, maxItemBytes)
	}
}

// TestForkInheritsRunOptions: a fork is a run of its source's workflow and
// inputs under its source's RunOptions (an overlay, which this host
// refuses non-empty, would be applied over them).
func TestForkInheritsRunOptions(t *testing.T) {
	now := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	src := NewRun("acme", "webhook", nil, now)
	src.Options = Options{Configurable: json.RawMessage(`{"version":1}`), Tags: json.RawMessage(`["a"]`), Metadata: json.RawMessage(`{"k":1}`)}
	f := NewFork(src, ForkReplay, 0, nil, now)
	if string(f.Options.Configurable) != `{"version":1}` || string(f.Options.Tags) != `["a"]` || string(f.Options.Metadata) != `{"k":1}` {
		t.Fatalf("the fork's options: %+v", f.Options)
	}
}
