// Package idemkit makes AWS Lambda APIs (behind API Gateway) and workflow
// executors exactly-once in effect on DynamoDB.
//
// Layer 1 (package idem) guarantees that a retried request never runs twice;
// Layer 2 (package ledger) guarantees that a retried workflow node never
// issues a second external effect. This root package only carries the SAM
// template, the single source of truth for the DynamoDB table definitions.
package idemkit

import _ "embed"

// Template is the SAM/CloudFormation template (template.yaml at the
// repository root), embedded at build time. Its DynamoDB resources are the
// single source of truth for table shapes: the test tooling and
// `idemkit tables create` create local tables from it (see internal/tables).
// Treat it as read-only.
//
//go:embed template.yaml
var Template []byte
