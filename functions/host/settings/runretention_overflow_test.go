package settings

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"time"
)

// A RUN_RETENTION_DAYS too large for a time.Duration is refused at
// start-up, never wrapped: 106752 days would wrap to a negative duration
// (read as "keep forever"), 213534 days to about 30 days (runs deleted
// after a month when the operator asked for centuries). The largest value
// that fits is accepted as it is.
func TestLoadEnvRunRetentionTooLarge(t *testing.T) {
	const day = 24 * time.Hour
	maxDays := int(math.MaxInt64 / int64(day))
	e, err := LoadEnv(Values(map[string]string{EnvRunRetention: strconv.Itoa(maxDays)}))
	if err != nil || e.RunRetention != time.Duration(maxDays)*day {
		t.Fatalf("RUN_RETENTION_DAYS=%d: RunRetention %v, %v; want %d days accepted", maxDays, e.RunRetention, err, maxDays)
	}
	for _, n := range []int{maxDays + 1, 213534, unbounded} {
		e, err := LoadEnv(Values(map[string]string{EnvRunRetention: strconv.Itoa(n)}))
		if !errors.Is(err, ErrConfig) {
			t.Errorf("RUN_RETENTION_DAYS=%d: RunRetention %v, %v; want refused (ErrConfig)", n, e.RunRetention, err)
		}
	}
}

// EFFECT_RETENTION_DAYS, the other day count kept as a duration (and the
// bound RUN_RETENTION_DAYS is compared with), is refused the same way.
func TestLoadEnvEffectRetentionTooLarge(t *testing.T) {
	maxDays := int(math.MaxInt64 / int64(24*time.Hour))
	if e, err := LoadEnv(Values(map[string]string{"EFFECT_RETENTION_DAYS": strconv.Itoa(maxDays)})); err != nil || e.EffectRetention != time.Duration(maxDays)*24*time.Hour {
		t.Fatalf("EFFECT_RETENTION_DAYS=%d: EffectRetention %v, %v; want accepted", maxDays, e.EffectRetention, err)
	}
	for _, n := range []int{maxDays + 1, 213534} {
		e, err := LoadEnv(Values(map[string]string{"EFFECT_RETENTION_DAYS": strconv.Itoa(n)}))
		if !errors.Is(err, ErrConfig) {
			t.Errorf("EFFECT_RETENTION_DAYS=%d: EffectRetention %v, %v; want refused (ErrConfig)", n, e.EffectRetention, err)
		}
	}
}
