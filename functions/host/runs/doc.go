// Package runs owns the reference host's run record and its store: the run
// and its lifecycle (Status, Run, NewRun), with what the record carries (its
// version history, decided.History; its node log, LogStore; its fork origin
// and ancestry, Fork, NewFork, RecordOf; the executor's claim on it, Epoch,
// Renew, Adopt, Claim, the node-log Fence and the fenced park and end,
// Park and Finish; its caps from configurable.run, Caps and Deadline, and
// its end on a breached one, Breach), the retention of ended runs (Run.ExpiresAt, retention.go), the
// RunStore in memory
// (MemRuns) and on DynamoDB (DynamoRuns, RunsTable), and the tenant-bound
// runId grammar and its path projection (NewRunID, ClaimRunID, ProjectID,
// DecodePathID). The caller's inbox of refused offline writes, kept in the
// same table, is functions/host/inbox.
//
// Every RunStore passes the conformance suite in runs/runstest; replay
// divergence (comparing a replay's events with its source's) is its own
// package, runs/divergence.
package runs
