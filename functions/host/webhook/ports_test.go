package webhook

import (
	"errors"
	"fmt"
	"testing"
)

// TestInternalDestinationsAreRefusedOnEveryPort: the destination policy
// admits any port of a public host (open W), but no port of an address
// inside the account: loopback, private, link-local (the instance
// metadata and the ECS credentials addresses), the IPv6 metadata address,
// IPv4-mapped loopback and "this network", on the ports of services an
// attacker would aim at (SSH, SMTP, Docker, Redis, the Lambda runtime API)
// and at the ends of the range, are refused at createRun, with or without
// private destinations admitted (loopback and metadata).
func TestInternalDestinationsAreRefusedOnEveryPort(t *testing.T) {
	always := []string{"127.0.0.1", "localhost", "169.254.169.254", "169.254.170.2", "[fd00:ec2::254]",
		"[::ffff:127.0.0.1]", "[::1]", "0.0.0.0", "[64:ff9b::a9fe:a9fe]"}
	privateOnly := []string{"10.0.0.1", "172.16.0.1", "192.168.0.1", "100.64.0.1", "[fd12::1]"}
	ports := []int{1, 22, 25, 80, 443, 2375, 6379, 8080, 9001, 65535}
	for _, scheme := range []string{"http", "https"} {
		for _, port := range ports {
			for _, h := range append(always, privateOnly...) {
				u := fmt.Sprintf("%s://%s:%d/hook", scheme, h, port)
				if err := (&WebhookPolicy{}).CheckURL(u); !errors.Is(err, ErrDestinationRefused) {
					t.Errorf("%s: %v, want refused", u, err)
				}
			}
			for _, h := range always {
				u := fmt.Sprintf("%s://%s:%d/hook", scheme, h, port)
				if err := (&WebhookPolicy{AllowPrivate: true}).CheckURL(u); !errors.Is(err, ErrDestinationRefused) {
					t.Errorf("%s with private destinations admitted: %v, want refused", u, err)
				}
			}
		}
	}
}
