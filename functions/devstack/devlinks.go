package devstack

import (
	"net"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// loopbackOrigin is the dev api's apifn.TestConfig.BaseURLOf for a server
// whose own base URL is base (http://127.0.0.1:PORT): a request whose Host
// names this server by a loopback name — localhost, 127.0.0.1 or ::1, with
// base's port — gets its links under that origin (runs.md §Response: links
// resolve under the origin the request was made to), so a client of
// http://localhost:PORT is never sent to 127.0.0.1. Any other Host gives ""
// (base is used): a name from the request is never trusted beyond these.
func loopbackOrigin(base string) func(events.APIGatewayV2HTTPRequest) string {
	u, err := url.Parse(base)
	if err != nil || u.Port() == "" {
		return func(events.APIGatewayV2HTTPRequest) string { return "" }
	}
	port := u.Port()
	return func(ev events.APIGatewayV2HTTPRequest) string {
		host, p, err := net.SplitHostPort(ev.RequestContext.DomainName)
		if err != nil || p != port {
			return ""
		}
		switch name := strings.ToLower(host); name {
		case "localhost", "127.0.0.1", "::1":
			return "http://" + net.JoinHostPort(name, port)
		}
		return ""
	}
}
