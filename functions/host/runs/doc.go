// Package runs owns the reference host's runs: the run record and its
// lifecycle (Status, Run, NewRun), the RunStore in memory (MemRuns) and on
// DynamoDB (DynamoRuns, RunsTable), the tenant-bound runId grammar and its
// path projection (NewRunID, ClaimRunID, ProjectID, DecodePathID) and a
// run's version history (decided.History). The caller's inbox of refused
// offline writes, kept in the same table, is functions/host/inbox.
package runs
