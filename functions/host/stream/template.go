package stream

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// TemplateFilter is the Filter of the stream event named event of the
// function resource function in a SAM template (its
// Properties.Events.<event>.Properties.FilterCriteria.Filters, each
// Pattern a JSON string): the one place the deployed mapping's filter is
// written, which `idemkit dev` applies to its own poller of that stream.
// An event without FilterCriteria is the zero Filter (every record); a
// missing function or event, or a Pattern that is not a plain string, is
// an error.
func TemplateFilter(template []byte, function, event string) (Filter, error) {
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
		return Filter{}, fmt.Errorf("stream: parse template: %w", err)
	}
	fn, ok := doc.Resources[function]
	if !ok {
		return Filter{}, fmt.Errorf("stream: the template has no resource %s", function)
	}
	ev, ok := fn.Properties.Events[event]
	if !ok {
		return Filter{}, fmt.Errorf("stream: %s has no event %s", function, event)
	}
	var patterns []string
	for i, f := range ev.Properties.FilterCriteria.Filters {
		if f.Pattern.Kind != yaml.ScalarNode || (f.Pattern.Tag != "" && f.Pattern.Tag != "!!str") {
			return Filter{}, fmt.Errorf("stream: %s.%s filter %d: the pattern is not a plain string", function, event, i)
		}
		patterns = append(patterns, f.Pattern.Value)
	}
	f, err := ParseFilter(patterns...)
	if err != nil {
		return Filter{}, fmt.Errorf("stream: %s.%s: %w", function, event, err)
	}
	return f, nil
}
