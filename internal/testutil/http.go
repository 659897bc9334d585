package testutil

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// DoJSON sends method url with body through http.DefaultClient and returns
// the response (its body read and closed) and the body decoded as a JSON
// object (nil when it is not one). header holds name, value pairs; a pair
// with an empty value is left out. Content-Type: application/json is sent
// when body is not empty, unless header sets it. A transport error fails
// the test.
func DoJSON(t testing.TB, method, url, body string, header ...string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp, m
}

// Bearer returns the Authorization value for key ("Bearer KEY"), or "" (no
// header, with DoJSON) when key is empty.
func Bearer(key string) string {
	if key == "" {
		return ""
	}
	return "Bearer " + key
}
