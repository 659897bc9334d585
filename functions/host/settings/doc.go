// Package settings owns the reference host's configuration: the one settings
// table (Settings: every environment variable, its flag, default and
// meaning), Env and LoadEnv (which reads it through a getenv it is given;
// Layered and Values compose sources), and the capabilities (discovery)
// document derived from an Env (CapabilitiesDoc). It reads no environment
// itself: the wiring (functions/host/kit) passes os.Getenv.
package settings
