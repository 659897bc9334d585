package runs

// itemPrefix starts the pk of every RunsTable item that is not a run (a
// caller's inbox, functions/host/inbox; a run scope's holder, scope.go):
// "#" is outside the runId grammar,
// so no runId is one, and RunFromItem (the executor's stream reader)
// skips them.
const itemPrefix = "#"
