package inbox_test

import (
	"testing"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/functions/host/inbox/inboxtest"
)

func TestConformanceMemory(t *testing.T) {
	inboxtest.Run(t, inboxtest.Harness{NewStore: func(_ *testing.T, cfg inbox.Config) inbox.Store { return inbox.NewMem(cfg) }})
}
