package storeconfig

import "testing"

func TestCheck(t *testing.T) {
	var nilClient interface{ M() }
	for _, c := range []struct {
		client any
		table  string
		want   string
	}{
		{nilClient, "t", "pkg: Config.Client is required"},
		{nil, "", "pkg: Config.Client is required"},
		{struct{}{}, "", "pkg: Config.Table is required"},
		{struct{}{}, "t", ""},
	} {
		err := Check("pkg", c.client, c.table)
		if got := ""; err != nil {
			got = err.Error()
			if got != c.want {
				t.Errorf("Check(%v, %q) = %q, want %q", c.client, c.table, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("Check(%v, %q) = nil, want %q", c.client, c.table, c.want)
		}
	}
}
