package apifn

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// digestStore is a memory store that keeps the Digest of every claim.
type digestStore struct {
	*idemmem.Store
	mu      sync.Mutex
	digests []string
}

func (s *digestStore) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	s.mu.Lock()
	s.digests = append(s.digests, rec.Digest)
	s.mu.Unlock()
	return s.Store.Claim(ctx, rec, now)
}

// TestCreateFingerprintWithoutDedupHeaderIsPinned: a createRun that
// sends no OpenWOP-Dedup header has the request fingerprint it had before
// the header joined the fingerprint of the requests that send it, byte
// for byte, under each preset policy: a record stored by the earlier code
// still replays to the same request. The values were computed on the
// code before that change and are pinned here; a request that sends the
// header has another fingerprint.
func TestCreateFingerprintWithoutDedupHeaderIsPinned(t *testing.T) {
	const key = "k-pin-fingerprint-000000000001"
	const body = `{"workflowId":"conformance-noop","scopeId":"order-77"}`
	// Computed on the code before OpenWOP-Dedup joined the fingerprint
	// (commit 187c068), the same under the three presets (their scopes
	// differ in the record's id, not its fingerprint).
	const pinned = "request-sha256-v1:ghXgv7z0WEUyPtqTEazKhW7Cdw362Bz6rtDAmxa7XD8"
	for _, c := range []struct {
		p    idem.Policy
		want string
	}{
		{idem.PolicyOpenWOP, pinned},
		{commerce.Policy, pinned},
		{erp.Policy, pinned},
	} {
		t.Run(c.p.Name, func(t *testing.T) {
			st := &digestStore{Store: idemmem.New()}
			f := hostOf(t, runs.NewMemRuns(), idem.Config{Policy: c.p, Store: st}, nil)
			req := func() events.APIGatewayV2HTTPRequest {
				e := ev("POST", "/runs", "acme", key, body)
				for k, v := range map[string]any{"namespace": "shop", "worker": "checkout", "clientId": "erp-client", "companyId": "C100", "organizationId": "ORG-1"} {
					e.RequestContext.Authorizer.Lambda[k] = v
				}
				return e
			}
			r, _ := f.do(t, req())
			if r.StatusCode != http.StatusCreated {
				t.Fatalf("create: %d %s", r.StatusCode, r.Body)
			}
			e := req()
			e.Headers["openwop-dedup"] = "enforce"
			f.do(t, e)
			st.mu.Lock()
			defer st.mu.Unlock()
			if len(st.digests) < 2 {
				t.Fatalf("claims: %q", st.digests)
			}
			if st.digests[0] != c.want {
				t.Fatalf("fingerprint without the header = %q, want %q (the one stored records carry)", st.digests[0], c.want)
			}
			if st.digests[1] == st.digests[0] {
				t.Fatalf("the header left the fingerprint as it was: %q", st.digests[1])
			}
		})
	}
}
