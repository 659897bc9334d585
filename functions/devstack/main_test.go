package devstack

import (
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }
