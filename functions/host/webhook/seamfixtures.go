package webhook

// The fixtures only the conformance seams profile offers (`idemkit dev
// --conformance-seams`): graph workflows the public conformance suite's
// run-lifecycle and durability scenarios ask for by name. The api
// handler refuses them (400 validation_error, unknown workflowId) and
// discovery does not list them unless the seams are on, so a deployed
// function never creates one.
const (
	// WorkflowMultiNode is a -> b -> c, three pure nodes: a deterministic
	// run whose log has node.completed events strictly inside it (a
	// mid-log fork point).
	WorkflowMultiNode = "conformance-multi-node"
	// WorkflowCancellable is one hold node of inputs.delayMs (default
	// 30000): a run that stays running long enough to be cancelled.
	WorkflowCancellable = "conformance-cancellable"
	// WorkflowFailure is one node that fails deterministically on every
	// execution: the run ends failed after one attempt, never retried.
	WorkflowFailure = "conformance-failure"
)

// TypeFail is the conformance-reserved node type that fails on every
// execution (node.failed, the run failed).
const TypeFail = "core.conformance.fail"

// SeamWorkflows lists the seams-only fixtures.
var SeamWorkflows = []string{WorkflowMultiNode, WorkflowCancellable, WorkflowFailure}

// SeamWorkflow reports whether id is a seams-only fixture.
func SeamWorkflow(id string) bool {
	for _, w := range SeamWorkflows {
		if w == id {
			return true
		}
	}
	return false
}

func init() {
	graphs[WorkflowMultiNode] = Graph{
		Nodes:       []Node{{"a", TypeNoop}, {"b", TypeNoop}, {"c", TypeNoop}},
		Next:        map[string]string{"a": "b", "b": "c"},
		MaxLoopback: 1,
	}
	graphs[WorkflowCancellable] = Graph{
		Nodes: []Node{{"hold", TypeHold}}, Next: map[string]string{}, MaxLoopback: 1, DefaultDelayMs: 30000,
	}
	graphs[WorkflowFailure] = Graph{
		Nodes: []Node{{"fail", TypeFail}}, Next: map[string]string{}, MaxLoopback: 1,
	}
}
