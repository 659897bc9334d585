package idemgin_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/internal/routertest"
	"github.com/idemkit/idemkit/idem/router/idemgin"
)

// TestHandlerThatBailsOnItsClientsHangUpRunsAgain: a gin handler that
// returns without a word once its request's context ended (its client
// hung up) bailed out, as behind net/http: nothing is recorded, and the
// retry runs it. One that set a status (c.Status) before returning is
// recorded as it answered. Before, the middleware committed gin's default
// 200 for every handler that wrote nothing, so the bail-out was recorded
// as an empty 200 and replayed to every retry of the key.
func TestHandlerThatBailsOnItsClientsHangUpRunsAgain(t *testing.T) {
	for _, answers := range []bool{false, true} {
		t.Run(fmt.Sprintf("answered=%t", answers), func(t *testing.T) {
			g := routertest.Guard(t, nil)
			r := gin.New()
			r.Use(idemgin.Middleware(g))
			runs := 0
			ctx, hangUp := context.WithCancel(context.Background())
			defer hangUp()
			r.POST("/orders", func(c *gin.Context) {
				runs++
				if runs == 1 {
					hangUp() // the client goes away while the handler works
					<-c.Request.Context().Done()
					if answers {
						c.Status(202) // its work done all the same
					}
					return
				}
				c.JSON(201, gin.H{"run": runs})
			})
			send := func(ctx context.Context) *httptest.ResponseRecorder {
				req := httptest.NewRequestWithContext(ctx, "POST", "/orders", strings.NewReader(`{"qty":1}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(idem.HeaderKey, key)
				rec := httptest.NewRecorder()
				r.ServeHTTP(rec, req)
				return rec
			}
			send(ctx)
			again := send(context.Background())
			switch {
			case answers && (again.Code != 202 || again.Header().Get(idem.HeaderOpenWOPReplay) != "true" || runs != 1):
				t.Fatalf("retry %d %v, %d runs; want the 202 replayed, one run", again.Code, again.Header(), runs)
			case !answers && (again.Code != 201 || again.Header().Get(idem.HeaderOpenWOPReplay) == "true" || runs != 2):
				t.Fatalf("retry %d %v %q, %d runs; want the handler run again (201)", again.Code, again.Header(), again.Body, runs)
			}
		})
	}
}
