// Package apikeys owns the reference host's API keys: minting (NewAPIKey),
// the KeyStore and CredentialStore in memory (MemKeys) and on DynamoDB
// (DynamoKeys, ApiKeysTable), the credential attributes a key carries, and
// the owner subject a tenant's runs are recorded under (OwnerSubject).
//
// API keys are stored only as SHA-256 hashes: the ApiKeysTable item is
// {pk: "key#" + hex(sha256(key)), tenant, attrs?}. A leaked table names no
// usable key.
//
// The same table holds each tenant's webhook signing secrets, one item
// {pk: "whsec#" + tenant, secret, previous?, previousUntil?, earlier?,
// rotatedAt}
// per tenant (RotateSigningSecret, RemoveSigningSecret), read by the
// executor through a cache (SigningSecrets). Unlike a key, a secret is
// stored as such: the sender needs it to sign.
package apikeys
