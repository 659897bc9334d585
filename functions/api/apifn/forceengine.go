package apifn

import (
	"encoding/json"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/header"
)

// HeaderForceEngineVersion asks createRun to emit a run's events as if an
// older engine ran it. The OpenAPI document reserves it for test keys.
const HeaderForceEngineVersion = "OpenWOP-Force-Engine-Version"

// CodeForceEngineVersionForbidden is the registry code (403) of a createRun
// that carries HeaderForceEngineVersion on a credential that may not use it.
const CodeForceEngineVersionForbidden = "force_engine_version_forbidden"

// checkForceEngineVersion refuses HeaderForceEngineVersion, whatever its
// value, with 403 force_engine_version_forbidden: this host has no test
// keys that may force an engine version (it advertises no
// testing.forceEngineVersionRange), so every credential is a production
// one. It runs before the Layer-1 claim, so the refusal is never a key's
// answer.
func checkForceEngineVersion(ev events.APIGatewayV2HTTPRequest) *apierr.Error {
	if len(header.Values(ev.Headers, HeaderForceEngineVersion)) == 0 {
		return nil
	}
	return apierr.New(http.StatusForbidden, CodeForceEngineVersionForbidden,
		"%s is for test keys only; no credential of this host may force an engine version", HeaderForceEngineVersion)
}

// checkCreate is createRun's check before the claim: the force-engine
// header (checkForceEngineVersion), then the body's size and media type
// (checkBody), then the type of its tenantId (checkCreateTenant).
func checkCreate(ev events.APIGatewayV2HTTPRequest) *apierr.Error {
	if e := checkForceEngineVersion(ev); e != nil {
		return e
	}
	if e := checkBody(ev); e != nil {
		return e
	}
	return checkCreateTenant(ev)
}

// checkCreateTenant is the 400 validation_error of a createRun body whose
// tenantId is not a string (webhook.CheckTenantID), before anything
// compares it with the credential's tenant: Layer 1 and bodyTenantRefusal
// read a number or a boolean as its text and refuse it 403 forbidden as
// another tenant's, while it is a malformed request, whatever the
// Content-Type and with or without a key. nil for a body that is not
// strict JSON text of an object (the checks after this one answer it).
func checkCreateTenant(ev events.APIGatewayV2HTTPRequest) *apierr.Error {
	body, e := eventBody(ev)
	if e != nil || len(body) == 0 || strictJSON(body) != nil {
		return nil
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(body, &raw) != nil {
		return nil
	}
	return webhook.CheckTenantID(raw)
}
