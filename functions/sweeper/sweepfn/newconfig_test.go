package sweepfn_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/sweeper/sweepfn"
	"github.com/idemkit/idemkit/internal/sweeper"
)

// NewFromEnv and Validate report every problem at once, in one error that
// matches ErrConfig.
func TestNewReportsEveryConfigProblem(t *testing.T) {
	_, err := sweepfn.NewFromEnv(settings.Env{}, nil, nil, nil)
	want := "sweepfn: no DynamoDB client; set at least one of EFFECTS_TABLE, FENCE_TABLE, IDEMPOTENCY_TABLE"
	if err == nil || err.Error() != want || !errors.Is(err, sweepfn.ErrConfig) {
		t.Errorf("NewFromEnv = %v (errors.Is ErrConfig: %v), want %q", err, errors.Is(err, sweepfn.ErrConfig), want)
	}
	ok := &sweeper.Sweeper{API: dynamodb.New(dynamodb.Options{Region: "us-east-1"}), Table: "t"}
	h := &sweepfn.Handler{Targets: []sweepfn.Target{{Label: "fence"}, {Label: "effects", Sweeper: ok}, {Label: "effects", Sweeper: ok}}, Margin: -time.Second}
	err = h.Validate()
	want = `sweepfn: target "fence" needs a label and a Sweeper with API and Table; table "effects" listed twice; negative Margin -1s`
	if err == nil || err.Error() != want || !errors.Is(err, sweepfn.ErrConfig) {
		t.Errorf("Validate = %v (errors.Is ErrConfig: %v), want %q", err, errors.Is(err, sweepfn.ErrConfig), want)
	}
}
