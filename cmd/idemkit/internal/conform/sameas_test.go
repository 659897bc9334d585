package conform

import "testing"

// RED_TEAM 460: under the commerce policy a replay is the Action as it is
// now, but never the Action in a status it cannot be in: a final status
// other than the first answer's, or no run status at all.
func TestReplayOfAnActionKeepsAFinalStatus(t *testing.T) {
	ans := func(body string) *answer { return &answer{status: 201, body: []byte(body), object: true} }
	cases := []struct {
		first, replay string
		same          bool
	}{
		{`{"runId":"r1","status":"completed"}`, `{"runId":"r1","status":"completed"}`, true},
		{`{"runId":"r1","status":"running"}`, `{"runId":"r1","status":"completed"}`, true},
		{`{"runId":"r1","status":"pending"}`, `{"runId":"r1","status":"cancelled"}`, true},
		{`{"runId":"r1","status":"completed"}`, `{"runId":"r1","status":"failed"}`, false},
		{`{"runId":"r1","status":"failed"}`, `{"runId":"r1","status":"completed"}`, false},
		{`{"runId":"r1","status":"completed"}`, `{"runId":"r1","status":"Completed"}`, false},
		{`{"runId":"r1","status":"pending"}`, `{"runId":"r1","status":"Pending"}`, false},
		{`{"runId":"r1","status":"running"}`, `{"runId":"r1"}`, false},
		{`{"runId":"r1","status":"completed"}`, `{"runId":"r2","status":"completed"}`, false},
	}
	for _, c := range cases {
		if got := ans(c.replay).sameAs(ans(c.first)); got != c.same {
			t.Errorf("replay %s of %s: same %v, want %v", c.replay, c.first, got, c.same)
		}
	}
}
