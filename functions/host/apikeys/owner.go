package apikeys

// subjectIssuer is the issuer of the subjects idemkit's API keys
// authenticate (RunSnapshot.owner.subject.issuer).
const subjectIssuer = "urn:idemkit:api-key"

// OwnerSubject returns the OpenWOP v2 subject (subject.schema.json) that owns
// every run of tenant: an idemkit API key identifies a tenant, not a person,
// so the subject is the tenant's API-key workload — issuer subjectIssuer,
// subjectId the tenant id, lane "api-key", kind "workload". It is derived
// from the run's tenant, never stored, so runs written before the snapshot
// carried an owner show the same subject as new ones. It never carries key
// material.
func OwnerSubject(tenant string) map[string]any {
	return map[string]any{"issuer": subjectIssuer, "subjectId": tenant, "tenant": tenant, "lane": "api-key", "kind": "workload"}
}
