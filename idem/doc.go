// Package idem is Layer 1 of idemkit: request idempotency for AWS Lambda APIs
// behind API Gateway, keyed by the Idempotency-Key header. Build a Guard with
// New, then wrap a handler with HTTPAPI (or REST, Middleware; idem/event for
// SQS and any other event):
//
//	store, err := dynamostore.New(dynamostore.Config{Client: ddb, Table: "idempotency"})
//	// ...
//	guard, err := idem.New(idem.Config{Store: store, Tenant: idem.AuthorizerKey("tenantId")})
//	// ...
//	lambda.Start(guard.HTTPAPI(createOrder))
//
// A retried request is answered from its record, byte for byte, and the
// handler runs to a final outcome at most once per scope (see Guard for the
// guarantees and their round trips). Guard.Do is the same protocol for one
// request at a time, for a handler that routes by itself. A chi,
// gorilla/mux, gin or echo router takes the middleware of its adapter,
// each a module of its own (idem/router/idemchi, idemmux, idemgin,
// idemecho), built on Guard.Routed. Behind a Lambda function URL in
// response streaming mode, serve the net/http handler through
// idem/idemlambdaurl (in place of aws-lambda-go's lambdaurl), so that
// answers up to MaxResponseBytes are kept though a buffered Lambda answer
// could not carry them.
//
// The package holds protocol logic only (keys, scope, digest, record
// states, decisions, response classification and the API Gateway v1/v2 and
// net/http adapters) and never imports the AWS SDK; records live behind the
// small Store interface (idem/memstore, idem/dynamostore), proven by one
// conformance suite (idem/idemtest). The offline-decision check is
// idem/decided; record IDs are idem/keyspace's, the canonical form of a
// request on a route with a Contract is idem/canon's.
//
// # Policy
//
// Everything that differs between idempotency policies — key grammar, scope
// parts, which outcomes are cached, retention, response headers, the
// in-flight answer and the error body — is one Policy value
// (Config.Policy): PolicyOpenWOP (the default), the commerce platform's
// commerce.Policy (package idem/policy/commerce), the ERP service's
// erp.Policy (package idem/policy/erp), or a value of your own.
// PolicyNamed picks a preset by name (IDEMPOTENCY_POLICY, read by
// idem/idemenv); a preset package registers its policy when imported.
//
// # Scope
//
// A record is keyed by keyspace.ID(tenant, operation, key) — the authenticated
// tenant (from the authorizer context, never the body) with the policy's
// credential parts (Policy.Scope.Credential), the routed operation (HTTP API
// routeKey, REST method+resource, or a mapped operation id; never the raw
// path) unless the policy leaves it out, and the caller's key. The raw key
// is never stored or logged (logs carry keyhash.Log values). Caller scopes
// live in their own keyspace (keyspace.CallerPrefix); host-generated locks never
// enter the Layer-1 store, and stores refuse IDs outside the caller
// keyspace, so no caller key can name, claim or suppress a host lock
// (keyspace separation).
//
// # Digest
//
// The request fingerprint (canon.RecipeRequest) covers everything that
// selects or changes the work: the method, the operation, the concrete path
// parameters, the canonical query string (decoded, sorted by name, repeated
// names kept in order), the headers a route declares (Route.Headers) and the
// body digest — SHA-256 over the RFC 8785 (JCS) canonical form of a JSON
// body (canon.RecipeJCS, optionally with a canon.Normalizer) or over the
// bytes of any other body (canon.RecipeBytes) — and the media type that
// body is read as, where the handler reads it by its Content-Type: a JSON
// type other than application/json ("application/merge-patch+json"), or
// the whole media type of any other body (a form, text in a charset,
// multipart under a boundary); a JSON body sent as application/json, a
// body without a Content-Type, an empty body and a body on a Route.JSON
// route carry none — and, when the request sends one naming another
// method than its own, a method-override header (X-HTTP-Method-Override,
// X-HTTP-Method, X-Method-Override), which a middleware inside the Guard
// may serve a POST by. The same key on a
// different order, query, body, body media type or tunnelled method is
// 409 idempotency_key_mismatch, never a replay. On a
// route with a Contract the body part is the canonical request hash
// (canon.RecipeCanonical), whatever the media type.
//
// # Decision on arrival
//
// For the same scope: absent or expired → claim and run; same digest and
// final → replay; same digest, pending and live → wait (Config.Wait,
// bounded by the context deadline) for a final outcome, else 409
// idempotency_in_flight with Retry-After; same digest, lease expired or
// retryable-failure → atomic reclaim (Attempt+1) and run; different digest
// → 409 idempotency_key_mismatch.
//
// A policy with InFlight.ModeHeader (the commerce policy: commerce.HeaderMode,
// "Idempotency-Mode") lets the caller say how a duplicate of a pending
// request waits: "sync" (the default) as above, within its budget; "async"
// is answered at once with 202 Accepted and the pending action
// {"status": "pending", "requestId": ...}. commerce.Policy also scopes a key
// by the credential's namespace and worker (not by the operation, which is
// in the fingerprint: 409 idempotency-mismatch), records nothing for a
// 400, 401, 403 or 429, replays every other outcome (a failed action
// replays as failed) and keeps records forever. See commerce.Key for how
// its keys, and repeated headers on each adapter, are read.
//
// # Tenant
//
// Config.Tenant is a required choice (AuthorizerKey, JWTClaim,
// IAMPrincipal, or SingleTenant for a function without an authorizer); New
// rejects a Config without one rather than answer 401 to every keyed
// request.
//
// # Events
//
// Guard.Once applies the same claim, lease, fencing and replay to one unit
// of work that is not an HTTP request (a returned value is cached, an error
// never is). Package idem/event builds the Lambda adapters on it: event.Func
// wraps any func(ctx, In) (Out, error), keyed by a function of the event;
// event.SQS runs each message of a batch once and reports only the failed
// ones in BatchItemFailures. Work scopes never share a keyspace with HTTP
// requests.
//
// # Error codes
//
// The Guard's own error answers are rendered by Policy.ErrorBody from the
// OpenWOP registry code (the default is the OpenWOP envelope). A missing
// key on a Required route is 400 idempotency_key_invalid with details
// {"reason":"missing"} (the registry has no "missing key" code).
// erp.Policy's envelope carries the ERP service's own codes in its error
// member (IDEMPOTENCY_REQUEST_IN_PROGRESS, IDEMPOTENCY_KEY_CONFLICT) and the
// current attempt's request_id.
package idem
