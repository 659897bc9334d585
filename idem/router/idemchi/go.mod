module github.com/idemkit/idemkit/idem/router/idemchi

go 1.26.8

require (
	github.com/go-chi/chi/v5 v5.5.0
	github.com/idemkit/idemkit v0.0.0
)

require (
	github.com/aws/aws-lambda-go v1.55.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
)

// Developed in the idemkit repository: the idem package is the checkout's.
// A module using this adapter requires both and, until idemkit is
// published, replaces github.com/idemkit/idemkit with its clone.
replace github.com/idemkit/idemkit => ../../..
