package apifn

// Another tenant's inbox entry, named by its id, is no entry of the
// caller's: resubmitting or discarding it is answered exactly as an id that
// names nothing, it is never listed, and it stays the owner's to decide.

import (
	"fmt"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestAnotherTenantsInboxEntryIsNoEntry: globex, holding the same
// credential attributes as acme's caller (namespace shop, worker
// checkout), resubmits and discards acme's waiting entry by its id: each
// answer is byte for byte the answer for an id of the same form that names
// no entry (existence is not disclosed), never 200; globex's inbox lists
// nothing; acme's entry is still waiting, acme's run untouched, and acme's
// own discard of it then wins.
func TestAnotherTenantsInboxEntryIsNoEntry(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		f, rs := inboxHost(t, e, nil)
		run, id := waitingCancel(t, f, rs, "acme queued")
		ghost := "A" + id[1:]
		if ghost == id {
			ghost = "B" + id[1:]
		}
		as := func(tenant, method, path, key string) eventReq {
			r := commerceReq(method, path, key)
			r.RequestContext.Authorizer.Lambda["tenantId"] = tenant
			return r
		}
		n := 0
		for _, verb := range []string{"resubmit", "discard"} {
			answers := map[string]string{}
			for _, target := range []string{id, ghost} {
				n++
				key := fmt.Sprintf("globex-%s-%022d", verb, n)
				resp, _ := f.do(t, as("globex", "POST", "/inbox/"+target+"/"+verb, key))
				if resp.StatusCode == 200 || resp.StatusCode >= 500 {
					t.Fatalf("globex %s of %s: %d %s", verb, target, resp.StatusCode, resp.Body)
				}
				answers[target] = fmt.Sprint(resp.StatusCode, " ", resp.Body)
			}
			if answers[id] != answers[ghost] {
				t.Errorf("globex %s: acme's entry answered %s, an id naming nothing %s: the answer discloses the entry", verb, answers[id], answers[ghost])
			}
		}
		resp, m := f.do(t, as("globex", "GET", "/inbox", ""))
		if es, _ := m["entries"].([]any); resp.StatusCode != 200 || len(es) != 0 {
			t.Fatalf("globex's inbox: %d %s, want 200 and no entry", resp.StatusCode, resp.Body)
		}
		if st := runStatus(t, rs, run.ID); st != runs.StatusRunning {
			t.Fatalf("acme's run is %s after globex's decisions, want running", st)
		}
		resp, m = f.do(t, commerceReq("POST", "/inbox/"+id+"/discard", "acme-discard-0000000000001"))
		if resp.StatusCode != 200 || m["status"] != "discarded" {
			t.Fatalf("acme's own discard: %d %s, want 200 discarded", resp.StatusCode, resp.Body)
		}
	})
}
