#!/usr/bin/env python3
"""Offline SAM checks of the copy-paste templates for library users
(docs/idempotency-table.yaml, docs/effects-table.yaml); make test runs it
through scripts/check-sam.sh, after cfn-lint.

For each template given:
1. The installed SAM translator transforms it without network access.
2. Every function is buildable and runnable as shipped: provided.al2023,
   arm64, Handler bootstrap, Metadata BuildMethod go1.x, an explicit Timeout.
3. Timeouts agree with the leases: a function behind an HttpApi event has a
   Timeout of at most 29 s (an HTTP API waits 30 s for its integration); a
   ledger worker's EFFECT_LEASE_SECONDS is below its Timeout; an SQS event
   reports batch item failures and its queue's VisibilityTimeout is at least
   six times the function's Timeout and more than Timeout plus the lease (a
   claim left by a timed-out invocation has expired when SQS redelivers).
4. Least privilege in the transformed template: no inline IAM statement has
   a "*" (or service:*) action or a "*" resource.
"""
import logging
import os
import sys

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

# The translator records usage metrics for a publisher this check does not
# run, and warns about them on exit ("There are unpublished metrics"): not
# a finding of this check, so not printed.
logging.getLogger("samtranslator.metrics.metrics").setLevel(logging.ERROR)


class ManagedPolicies:
    """The two AWS managed policies SAM attaches to a function role it
    creates (basic execution, SQS polling); nothing is looked up."""

    def load(self):
        return {
            "AWSLambdaBasicExecutionRole": "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
            "AWSLambdaSQSQueueExecutionRole": "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole",
        }


def as_list(v):
    return v if isinstance(v, list) else [v]


def leaves(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, list):
        for x in v:
            yield from leaves(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from leaves(x)


def check(path):
    with open(path) as f:
        tmpl = yaml_parse(f.read())
    problems = []
    res = tmpl.get("Resources", {})
    fns = {lid: r for lid, r in res.items() if r.get("Type") == "AWS::Serverless::Function"}
    if not fns:
        problems.append("no AWS::Serverless::Function")
    for lid, r in fns.items():
        p, md = r["Properties"], r.get("Metadata", {})
        if p.get("Runtime") != "provided.al2023" or p.get("Architectures") != ["arm64"] or p.get("Handler") != "bootstrap":
            problems.append(f"{lid}: want Runtime provided.al2023, Architectures [arm64], Handler bootstrap")
        if md.get("BuildMethod") != "go1.x":
            problems.append(f"{lid}: want Metadata BuildMethod go1.x (sam build compiles the Go package)")
        timeout = p.get("Timeout")
        if not isinstance(timeout, int):
            problems.append(f"{lid}: want an explicit Timeout in seconds")
            continue
        lease = p.get("Environment", {}).get("Variables", {}).get("EFFECT_LEASE_SECONDS")
        lease = int(lease) if lease is not None else None
        if lease is not None and lease >= timeout:
            problems.append(f"{lid}: EFFECT_LEASE_SECONDS {lease} is not below Timeout {timeout}")
        events = p.get("Events", {})
        if not events:
            problems.append(f"{lid}: no event source")
        for ename, ev in events.items():
            t, ep = ev.get("Type"), ev.get("Properties", {})
            if t == "HttpApi" and timeout > 29:
                problems.append(f"{lid}.{ename}: Timeout {timeout} exceeds the HTTP API's 30 s integration limit")
            if t == "SQS":
                if "ReportBatchItemFailures" not in ep.get("FunctionResponseTypes", []):
                    problems.append(f"{lid}.{ename}: want FunctionResponseTypes [ReportBatchItemFailures]")
                q = ep.get("Queue")
                qid = q.get("Fn::GetAtt", [None])[0] if isinstance(q, dict) else None
                vis = res.get(qid, {}).get("Properties", {}).get("VisibilityTimeout") if qid else None
                if not isinstance(vis, int):
                    problems.append(f"{lid}.{ename}: the queue must be a resource here with a VisibilityTimeout")
                elif vis < 6 * timeout or vis <= timeout + (lease or 0):
                    problems.append(f"{lid}.{ename}: VisibilityTimeout {vis} below 6 x Timeout {timeout} or Timeout + lease")
    for lid, r in tmpl["Resources"].items():
        if r.get("Type") == "AWS::Serverless::Function":
            cu = r["Properties"].get("CodeUri", "")
            if isinstance(cu, str) and not cu.startswith("s3://"):
                r["Properties"]["CodeUri"] = f"s3://idemkit-check/{lid}.zip"
    out = transform(tmpl, {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}, ManagedPolicies())
    for lid, r in out["Resources"].items():
        if r["Type"] != "AWS::IAM::Role":
            continue
        for pol in r.get("Properties", {}).get("Policies", []):
            st = pol["PolicyDocument"].get("Statement", [])
            for s in as_list(st):
                for a in as_list(s.get("Action", [])):
                    if isinstance(a, str) and (a == "*" or a.endswith(":*")):
                        problems.append(f"{lid}: wildcard action {a}")
                for x in leaves(s.get("Resource", [])):
                    if x == "*":
                        problems.append(f"{lid}: wildcard resource")
    return problems, len(out["Resources"])


def main(paths):
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ.setdefault("AWS_REGION", "us-east-1")
    failed = 0
    for path in paths:
        problems, n = check(path)
        for p in problems:
            print(f"FAIL: {path}: {p}")
        failed += len(problems)
        if not problems:
            print(f"samtranslator transformed {path}: {n} resources, function checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
