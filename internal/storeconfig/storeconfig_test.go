package storeconfig

import (
	"errors"
	"testing"
)

var errConfig = errors.New("pkg: invalid config")

func TestCheck(t *testing.T) {
	var nilClient interface{ M() }
	for _, c := range []struct {
		client any
		table  string
		want   string
	}{
		{nilClient, "t", "pkg: Config.Client is required"},
		{nil, "", "pkg: Config.Client is required; Config.Table is required"},
		{struct{}{}, "", "pkg: Config.Table is required"},
		{struct{}{}, "t", ""},
	} {
		err := Check("pkg", errConfig, c.client, c.table)
		if got := ""; err != nil {
			got = err.Error()
			if got != c.want || !errors.Is(err, errConfig) {
				t.Errorf("Check(%v, %q) = %q (errors.Is ErrConfig: %v), want %q", c.client, c.table, got, errors.Is(err, errConfig), c.want)
			}
		} else if c.want != "" {
			t.Errorf("Check(%v, %q) = nil, want %q", c.client, c.table, c.want)
		}
	}
}
