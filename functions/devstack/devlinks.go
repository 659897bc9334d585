package devstack

import (
	"net"
	"net/url"
	"strconv"
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

// baseURL is the base URL dev names itself by, listening on ln: its
// address, or, when that is an unspecified address (--addr :3000,
// 0.0.0.0:3000, [::]:3000: every interface), http://localhost:PORT, a
// name a client on this machine (or a container's or VM's host, through
// its forwarded port) can follow, where http://[::]:PORT is none
// (RED_TEAM 514). Dev keeps listening where it was asked; only the links
// and the lines it prints change. A request's Host is never the base
// (loopbackOrigin trusts only loopback names): an answer is recorded and
// replayed to every caller of its key.
func baseURL(ln net.Listener) string {
	return "http://" + linkHost(ln.Addr())
}

// linkHost is addr as a link names it: localhost for an unspecified IP.
func linkHost(addr net.Addr) string {
	if a, ok := addr.(*net.TCPAddr); ok && a.IP.IsUnspecified() {
		return net.JoinHostPort("localhost", strconv.Itoa(a.Port))
	}
	return addr.String()
}

// everyInterface reports whether ln listens on an unspecified address.
func everyInterface(ln net.Listener) bool {
	a, ok := ln.Addr().(*net.TCPAddr)
	return ok && a.IP.IsUnspecified()
}
