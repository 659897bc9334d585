package idemkit_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/stream"
	streammapping "github.com/idemkit/idemkit/functions/host/stream/mapping"
)

// The run retention is wired end to end in template.yaml: the
// RunRetentionDays parameter (empty by default: every run kept forever, so
// an upgrade deletes nothing) sets RUN_RETENTION_DAYS on exactly the
// functions that end runs (the api: cancels; the executor: completions,
// failures, breached caps), RunsTable's TTL is on expiresAt (the attribute
// the runs store stamps on an ended run), and the only stream consumer of
// RunsTable, the executor, is invoked for a new run's INSERT only (its
// filter evaluated on a run's records), so the TTL's deletions (REMOVE)
// never invoke it.
func TestRunRetentionTemplateWiring(t *testing.T) {
	var doc struct {
		Parameters map[string]struct {
			Type           string `yaml:"Type"`
			Default        string `yaml:"Default"`
			AllowedPattern string `yaml:"AllowedPattern"`
		} `yaml:"Parameters"`
		Resources map[string]struct {
			Type       string    `yaml:"Type"`
			Properties yaml.Node `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(idemkit.Template, &doc); err != nil {
		t.Fatal(err)
	}
	p, ok := doc.Parameters["RunRetentionDays"]
	if !ok {
		t.Fatal("template.yaml has no RunRetentionDays parameter")
	}
	if p.Type != "String" || p.Default != "" {
		t.Errorf("RunRetentionDays: Type %q Default %q, want String with an empty default (keep forever)", p.Type, p.Default)
	}
	re, err := regexp.Compile(p.AllowedPattern)
	if err != nil || p.AllowedPattern == "" {
		t.Fatalf("RunRetentionDays AllowedPattern %q: %v", p.AllowedPattern, err)
	}
	for v, want := range map[string]bool{"": true, "0": true, "14": true, "3650": true, "-1": false, "14d": false, "forever": false, "1.5": false} {
		if re.MatchString(v) != want {
			t.Errorf("RunRetentionDays %q allowed = %v, want %v", v, !want, want)
		}
	}

	var table struct {
		TTL struct {
			AttributeName string `yaml:"AttributeName"`
			Enabled       bool   `yaml:"Enabled"`
		} `yaml:"TimeToLiveSpecification"`
	}
	runsTable := doc.Resources["RunsTable"].Properties
	if err := runsTable.Decode(&table); err != nil {
		t.Fatal(err)
	}
	if table.TTL.AttributeName != "expiresAt" || !table.TTL.Enabled {
		t.Errorf("RunsTable TimeToLiveSpecification = %+v, want expiresAt enabled", table.TTL)
	}

	var setBy, consumers []string
	for id, r := range doc.Resources {
		if r.Type != "AWS::Serverless::Function" {
			continue
		}
		var fn struct {
			Environment struct {
				Variables map[string]yaml.Node `yaml:"Variables"`
			} `yaml:"Environment"`
			Events map[string]struct {
				Type       string `yaml:"Type"`
				Properties struct {
					Stream         yaml.Node `yaml:"Stream"`
					FilterCriteria struct {
						Filters []struct {
							Pattern string `yaml:"Pattern"`
						} `yaml:"Filters"`
					} `yaml:"FilterCriteria"`
				} `yaml:"Properties"`
			} `yaml:"Events"`
		}
		if err := r.Properties.Decode(&fn); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if v, ok := fn.Environment.Variables[settings.EnvRunRetention]; ok {
			setBy = append(setBy, id)
			if v.Tag != "!Ref" || v.Value != "RunRetentionDays" {
				t.Errorf("%s: %s = %s %s, want !Ref RunRetentionDays", id, settings.EnvRunRetention, v.Tag, v.Value)
			}
			// Each function that ends runs raises a run retention below
			// the Layer-1 retention to it (RED_TEAM 546), so each reads
			// the api's policy and retention: an executor without them
			// took the OpenWOP default's 24 hours and stamped the runs it
			// ended with a shorter retention than the api's.
			for name, param := range map[string]string{"IDEMPOTENCY_POLICY": "IdempotencyPolicy", "IDEMPOTENCY_RETENTION_HOURS": "RetentionHours"} {
				if v, ok := fn.Environment.Variables[name]; !ok || v.Tag != "!Ref" || v.Value != param {
					t.Errorf("%s sets %s but %s = %s %s, want !Ref %s", id, settings.EnvRunRetention, name, v.Tag, v.Value, param)
				}
			}
		}
		for name, ev := range fn.Events {
			if ev.Type != "DynamoDB" || !strings.HasPrefix(ev.Properties.Stream.Value, "RunsTable.") {
				continue
			}
			consumers = append(consumers, id+"."+name)
			fs := ev.Properties.FilterCriteria.Filters
			if len(fs) == 0 {
				t.Errorf("%s.%s reads RunsTable's stream unfiltered, want a new run's INSERT and a run's resume only", id, name)
				continue
			}
			f, err := streammapping.Filter(idemkit.Template, id, name)
			if err != nil {
				t.Fatalf("%s.%s filter %q: %v", id, name, fs[0].Pattern, err)
			}
			// An ended run carrying expiresAt, as the TTL deletes it.
			run := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "acme/r1"},
				"status": &types.AttributeValueMemberS{Value: "completed"}, "expiresAt": &types.AttributeValueMemberN{Value: "1700000000"}}
			key := map[string]types.AttributeValue{"pk": run["pk"]}
			for _, rec := range []stream.StreamRecord{
				{EventName: "REMOVE", Keys: key, OldImage: run, PrincipalID: stream.TTLPrincipal, IdentityType: "Service"},
				{EventName: "REMOVE", Keys: key, OldImage: run},
				{EventName: "MODIFY", Keys: key, OldImage: run, NewImage: run},
			} {
				if f.Match(rec) {
					t.Errorf("%s.%s filter %q hands over a run's %s (TTL: %v): want a new run's INSERT and a resume only, so a TTL deletion never invokes it", id, name, fs[0].Pattern, rec.EventName, rec.TTLDeletion())
				}
			}
			if !f.Match(stream.StreamRecord{EventName: "INSERT", Keys: key, NewImage: run}) {
				t.Errorf("%s.%s filter %q does not hand over a run's INSERT", id, name, fs[0].Pattern)
			}
		}
	}
	if !slices.Equal(consumers, []string{"ExecutorFunction.RunsStream"}) {
		t.Errorf("RunsTable's stream is read by %v, want the executor's RunsStream only", consumers)
	}
	slices.Sort(setBy)
	if want := []string{"ApiFunction", "ExecutorFunction"}; !slices.Equal(setBy, want) {
		t.Errorf("%s is set on %v, want %v (the functions that end runs)", settings.EnvRunRetention, setBy, want)
	}
}
