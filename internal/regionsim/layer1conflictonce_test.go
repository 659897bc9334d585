package regionsim_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLayer1ConflictIsRecordedOnce: a Layer-1 conflict (one key, a run in
// each region) is one conflict event and one count in the whole
// deployment, whichever write replication ordered last: where the lower
// run was overwritten, by the region that writes it back; else by the
// region whose record the lower run replicated over. The write-back's own
// change, in the stream of the region that wrote it and of the region it
// replicates to, shows the same two runs, and is not recorded again.
func TestLayer1ConflictIsRecordedOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names [2]string // the runs eu and us create
	}{
		{"lower run written first", [2]string{"acme/aaaa-first-0123456789", "acme/zzzz-second-012345678"}},
		{"lower run written second", [2]string{"acme/zzzz-first-0123456789", "acme/aaaa-second-012345678"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			w := newAudited(t, auditedConfig{handler: func(string) http.HandlerFunc {
				return func(rw http.ResponseWriter, _ *http.Request) {
					n := runs.Add(1)
					rw.Header().Set("Content-Type", "application/json")
					rw.WriteHeader(http.StatusCreated)
					_, _ = io.WriteString(rw, `{"runId":"`+tc.names[n-1]+`","status":"pending"}`)
				}
			}})
			w.rep.SetPartitioned(true)
			if r, b := w.post(eu); r.StatusCode != http.StatusCreated {
				t.Fatalf("eu: %d %s", r.StatusCode, b)
			}
			w.step(10 * time.Millisecond)
			if r, b := w.post(us); r.StatusCode != http.StatusCreated {
				t.Fatalf("us: %d %s", r.StatusCode, b)
			}
			w.step(0)
			w.heal(false)
			events, _ := w.events()
			var where []string
			for _, ev := range events {
				where = append(where, ev["region"].(string))
			}
			if len(events) != 1 {
				t.Fatalf("%d conflict events for one conflict (regions %s); want 1", len(events), strings.Join(where, ", "))
			}
		})
	}
}
