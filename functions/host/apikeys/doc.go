// Package apikeys owns the reference host's API keys: minting (NewAPIKey),
// the KeyStore and CredentialStore in memory (MemKeys) and on DynamoDB
// (DynamoKeys, ApiKeysTable), the credential attributes a key carries, and
// the owner subject a tenant's runs are recorded under (OwnerSubject).
//
// API keys are stored only as SHA-256 hashes: the ApiKeysTable item is
// {pk: "key#" + hex(sha256(key)), tenant, attrs?}. A leaked table names no
// usable key.
package apikeys
