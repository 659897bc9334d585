module github.com/idemkit/idemkit/idem/router/idemecho

go 1.26.8

require (
	github.com/idemkit/idemkit v0.0.0
	github.com/labstack/echo/v4 v4.16.5
)

require (
	github.com/aws/aws-lambda-go v1.55.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/labstack/gommon v0.5.0 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.22 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fasttemplate v1.2.2 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)

// Developed in the idemkit repository: the idem package is the checkout's.
// A module using this adapter requires both and, until idemkit is
// published, replaces github.com/idemkit/idemkit with its clone.
replace github.com/idemkit/idemkit => ../../..
