// Package mapping reads the event source mappings of template.yaml that
// `idemkit dev` emulates: the filter of a stream mapping (Filter), and the
// executor's mapping on the runs table's stream (RunsStream). It parses
// YAML, so it is linked by `idemkit dev` and tests only, never by a
// Lambda function (which gets its records already filtered).
package mapping

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/functions/host/stream"
)

// The executor's event source mapping on the runs table's stream in
// template.yaml: its function resource and event name.
const (
	RunsStreamFunction = "ExecutorFunction"
	RunsStreamEvent    = "RunsStream"
)

// RunsStream is the filter of the executor's mapping on the runs table's
// stream, as the embedded template.yaml declares it: what `idemkit dev`
// hands its executor, and what the deployed mapping invokes it with.
func RunsStream() (stream.Filter, error) {
	return Filter(idemkit.Template, RunsStreamFunction, RunsStreamEvent)
}

// Filter is the stream.Filter of the stream event named event of the
// function resource function in a SAM template (its
// Properties.Events.<event>.Properties.FilterCriteria.Filters, each
// Pattern a JSON string): the one place the deployed mapping's filter is
// written. An event without FilterCriteria is the zero Filter (every
// record); a missing function or event, or a Pattern that is not a plain
// string, is an error.
func Filter(template []byte, function, event string) (stream.Filter, error) {
	var doc struct {
		Resources map[string]struct {
			Properties struct {
				Events map[string]struct {
					Type       string `yaml:"Type"`
					Properties struct {
						FilterCriteria struct {
							Filters []struct {
								Pattern yaml.Node `yaml:"Pattern"`
							} `yaml:"Filters"`
						} `yaml:"FilterCriteria"`
					} `yaml:"Properties"`
				} `yaml:"Events"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(template, &doc); err != nil {
		return stream.Filter{}, fmt.Errorf("stream: parse template: %w", err)
	}
	fn, ok := doc.Resources[function]
	if !ok {
		return stream.Filter{}, fmt.Errorf("stream: the template has no resource %s", function)
	}
	ev, ok := fn.Properties.Events[event]
	if !ok {
		return stream.Filter{}, fmt.Errorf("stream: %s has no event %s", function, event)
	}
	var patterns []string
	for i, f := range ev.Properties.FilterCriteria.Filters {
		if f.Pattern.Kind != yaml.ScalarNode || (f.Pattern.Tag != "" && f.Pattern.Tag != "!!str") {
			return stream.Filter{}, fmt.Errorf("stream: %s.%s filter %d: the pattern is not a plain string", function, event, i)
		}
		patterns = append(patterns, f.Pattern.Value)
	}
	f, err := stream.ParseFilter(patterns...)
	if err != nil {
		return stream.Filter{}, fmt.Errorf("stream: %s.%s: %w", function, event, err)
	}
	return f, nil
}
