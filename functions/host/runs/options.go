package runs

import "encoding/json"

// Options are a run's RunOptions, persisted at creation: configurable, tags
// and metadata, each the JSON value createRun received (compacted: the
// whitespace between tokens dropped, every other byte kept, so numbers,
// escapes and key order are as the caller wrote them), nil when the body
// had none. Create writes them once; no other write of a run store changes
// them, so configurable never changes after creation. The executor acts on
// configurable's run section (Caps: the run timeout, the loop iterations)
// and hands every execution of a node the same configurable bytes; tags
// and metadata it never consumes for an execution decision.
type Options struct {
	// Configurable is RunOptions.configurable (configurable.schema.json),
	// validated at create.
	Configurable json.RawMessage `json:"configurable,omitempty"`
	// Tags is RunOptions.tags, an array of strings.
	Tags json.RawMessage `json:"tags,omitempty"`
	// Metadata is RunOptions.metadata, a JSON object.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}
