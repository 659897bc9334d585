#!/usr/bin/env python3
"""Offline SAM checks of template.yaml (make test runs scripts/check-sam.sh).

1. The installed SAM translator (samtranslator) transforms the template
   without network access (managed policies are never looked up: the
   template attaches none).
2. Least privilege in the transformed template: no IAM statement has a "*"
   (or service:*) action or a "*" resource (except the X-Ray write actions,
   which take no resource), no role carries managed policies, and every
   function has its own role; no role may create log groups (the stack
   declares each function's).
3. The five functions are provided.al2023 / arm64 with BuildMethod go1.x,
   the stream mappings bisect on error with a bounded retry count and an
   on-failure destination.
4. The retention sweeper (SweeperFunction) exists exactly when a table has
   no TTL (Condition Swept: the effects table is MRSC, StrongEffects, or the
   stack is a fenced-effects home stack, whose IdempotencyTable and
   EffectsTable have no TTL),
   runs on a schedule, and its role may only Scan and DeleteItem (no other
   DynamoDB action); which tables, per configuration, is checked by
   internal/regionsim's TestTemplateSweeperPerPosture.
5. Operations: every table is kept on stack delete and replacement (Retain)
   and protected from deletion by hand (DeletionProtectionEnabled);
   every function logs JSON into its own declared log group (retention
   LogRetentionDays) and traces by the XRayTracing switch; every alarm
   notifies AlarmTopicArn when it is given and has no action otherwise.
   Which metrics the alarms watch is checked against the code by
   alarms_test.go.
6. Load: the HTTP API's stage throttles every route (DefaultRouteSettings
   from ApiThrottleRateLimit and ApiThrottleBurstLimit, each at least 1: a
   limit of 0 would refuse every request), and the api function's reserved
   concurrency is the ApiReservedConcurrency parameter when it is not 0 and
   absent otherwise (0 would stop the function).
7. Secrets: every parameter named ...Secret... is NoEcho, so
   CloudFormation never shows its value (scripts/check_samconfig.py keeps
   it out of samconfig.toml).

The transform keeps every resource with its Condition, so the checks cover
both EffectsConsistency variants at once; internal/regionsim's
TestTemplateMultiRegionVariants also runs this script on each deployment
variant (parameter defaults replaced), STRONG included.
"""
import json
import os
import re
import sys

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse


class NoManagedPolicies:
    """Managed-policy loader stub: the template must not need one."""

    def load(self):
        return {}


def walk_statements(doc):
    st = doc.get("Statement", [])
    return st if isinstance(st, list) else [st]


def as_list(v):
    return v if isinstance(v, list) else [v]


def leaves(v):
    """Every string inside v, through lists and intrinsics (Fn::If branches)."""
    if isinstance(v, str):
        yield v
    elif isinstance(v, list):
        for x in v:
            yield from leaves(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from leaves(x)


# X-Ray's write actions support no resource-level permission: the one
# statement allowed a "*" resource is exactly these, under XRayTracing Active.
XRAY_WRITE = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


def xray_only(statement):
    acts = as_list(statement.get("Action", []))
    return bool(acts) and all(isinstance(a, str) and a in XRAY_WRITE for a in acts)


def check(path):
    # Offline: the translator asks boto for the region and partition.
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ.setdefault("AWS_REGION", "us-east-1")
    with open(path) as f:
        tmpl = yaml_parse(f.read())
    problems = []
    for name in ("ApiFunction", "AuthorizerFunction", "ExecutorFunction", "AuditorFunction", "SweeperFunction"):
        res = tmpl["Resources"].get(name)
        if res is None:
            problems.append(f"{name}: missing")
            continue
        p, md = res["Properties"], res.get("Metadata", {})
        if p.get("Runtime") != "provided.al2023" or p.get("Architectures") != ["arm64"] or md.get("BuildMethod") != "go1.x":
            problems.append(f"{name}: want provided.al2023, arm64, BuildMethod go1.x")
    sweeper = tmpl["Resources"].get("SweeperFunction", {})
    if any(tmpl["Resources"].get(lid, {}).get("Condition") != "Swept" for lid in ("SweeperFunction", "SweeperRole", "SweeperLogGroup")):
        problems.append("SweeperFunction/SweeperRole/SweeperLogGroup: want Condition Swept (a table without TTL: MRSC effects, or a fenced-effects home stack's Layer 1 and effects)")
    if [e.get("Type") for e in sweeper.get("Properties", {}).get("Events", {}).values()] != ["Schedule"]:
        problems.append("SweeperFunction: want exactly one Schedule event")
    # What `sam package` does before the transform: local code -> S3 URIs.
    for lid, r in tmpl["Resources"].items():
        if r.get("Type") == "AWS::Serverless::Function":
            cu = r["Properties"].get("CodeUri", "")
            if isinstance(cu, str) and not cu.startswith("s3://"):
                r["Properties"]["CodeUri"] = f"s3://idemkit-check/{lid}.zip"
    params = tmpl.get("Parameters", {})
    for name, p in params.items():
        if "Secret" in name and str(p.get("NoEcho", "")).lower() != "true":
            problems.append(f"{name}: a secret needs NoEcho: true (CloudFormation shows every other parameter's value)")
    if "KeyHashSecret" not in params:
        problems.append("KeyHashSecret: missing (the api function's log-hashing secret)")
    for name in ("ApiThrottleRateLimit", "ApiThrottleBurstLimit"):
        p = params.get(name, {})
        if p.get("Type") != "Number" or "Default" not in p or float(p.get("MinValue", 0)) < 1:
            problems.append(f"{name}: want a Number parameter with a default and MinValue at least 1")
    # A String of digits, one spelling per value: the condition below
    # compares its text with "0", which a Number's "00" or "-0" is not
    # (they would reserve 0 executions, stopping the function).
    p = params.get("ApiReservedConcurrency", {})
    if p.get("Type") != "String" or p.get("AllowedPattern") != "^(0|[1-9][0-9]{0,5})$" or not re.fullmatch("0|[1-9][0-9]{0,5}", str(p.get("Default", ""))):
        problems.append("ApiReservedConcurrency: want a String parameter with AllowedPattern ^(0|[1-9][0-9]{0,5})$ (digits, no leading zero) and a default it matches (0: no reservation)")
    cond = tmpl.get("Conditions", {}).get("ApiReservesConcurrency")
    if cond != {"Fn::Not": [{"Fn::Equals": [{"Ref": "ApiReservedConcurrency"}, "0"]}]}:
        problems.append("Conditions: want ApiReservesConcurrency, true when ApiReservedConcurrency is not 0")
    api = tmpl["Resources"].get("ApiFunction", {}).get("Properties", {})
    if api.get("ReservedConcurrentExecutions") != {"Fn::If": ["ApiReservesConcurrency", {"Ref": "ApiReservedConcurrency"}, {"Ref": "AWS::NoValue"}]}:
        problems.append("ApiFunction: want ReservedConcurrentExecutions from ApiReservedConcurrency under ApiReservesConcurrency, none otherwise")
    out = transform(tmpl, {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}, NoManagedPolicies())
    resources = out["Resources"]
    roles = {}
    for lid, r in resources.items():
        t = r["Type"]
        props = r.get("Properties", {})
        if t == "AWS::IAM::Role":
            if props.get("ManagedPolicyArns"):
                problems.append(f"{lid}: managed policies {props['ManagedPolicyArns']}")
            for pol in props.get("Policies", []):
                for s in walk_statements(pol["PolicyDocument"]):
                    if lid == "SweeperRole":
                        extra = [a for a in as_list(s.get("Action", [])) if isinstance(a, str) and a.startswith("dynamodb:")
                                 and a not in ("dynamodb:Scan", "dynamodb:DeleteItem")]
                        if extra:
                            problems.append(f"{lid}: the sweeper needs only Scan and DeleteItem, not {extra}")
                    for a in as_list(s.get("Action", [])):
                        if isinstance(a, str) and (a == "*" or a.endswith(":*")):
                            problems.append(f"{lid}: wildcard action {a}")
                        if a == "logs:CreateLogGroup":
                            problems.append(f"{lid}: logs:CreateLogGroup (the stack declares every function's log group)")
                    for res_ in leaves(s.get("Resource", [])):
                        if res_ == "*" and not xray_only(s):
                            problems.append(f"{lid}: wildcard resource")
        if t == "AWS::Lambda::Function":
            role = json.dumps(props.get("Role"))
            if role in roles:
                problems.append(f"{lid} shares a role with {roles[role]}")
            roles[role] = lid
        if t.startswith("AWS::DynamoDB::") and (r.get("DeletionPolicy") != "Retain" or r.get("UpdateReplacePolicy") != "Retain"):
            problems.append(f"{lid}: a table that holds records needs DeletionPolicy and UpdateReplacePolicy Retain")
        if t == "AWS::DynamoDB::Table" and props.get("DeletionProtectionEnabled") is not True:
            problems.append(f"{lid}: a table that holds records needs DeletionProtectionEnabled true (a table deleted by hand forgets every key)")
        if t == "AWS::DynamoDB::GlobalTable":
            for rep in props.get("Replicas", []):
                if isinstance(rep, dict) and "Fn::If" in rep:
                    rep = rep["Fn::If"][1]
                if isinstance(rep, dict) and rep.get("DeletionProtectionEnabled") is not True:
                    problems.append(f"{lid}: every replica needs DeletionProtectionEnabled true (a replica deleted by hand forgets every key)")
        if t == "AWS::Lambda::Function":
            lc = props.get("LoggingConfig", {})
            group = lc.get("LogGroup", {}).get("Ref") if isinstance(lc.get("LogGroup"), dict) else None
            if lc.get("LogFormat") != "JSON" or resources.get(group, {}).get("Type") != "AWS::Logs::LogGroup":
                problems.append(f"{lid}: want LoggingConfig LogFormat JSON into a log group of the stack")
            elif resources[group]["Properties"].get("RetentionInDays") != {"Ref": "LogRetentionDays"}:
                problems.append(f"{group}: want RetentionInDays from LogRetentionDays")
            elif resources[group].get("Condition") != r.get("Condition"):
                problems.append(f"{group}: want the Condition of {lid}")
            if props.get("TracingConfig", {}).get("Mode") != {"Fn::If": ["XRayActive", "Active", "PassThrough"]}:
                problems.append(f"{lid}: want TracingConfig Mode from the XRayTracing switch")
        if t == "AWS::CloudWatch::Alarm":
            for a in ("AlarmActions", "OKActions"):
                if props.get(a) != {"Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]}:
                    problems.append(f"{lid}: {a} must notify AlarmTopicArn when given, nothing otherwise")
        if t == "AWS::Lambda::EventSourceMapping":
            if not props.get("BisectBatchOnFunctionError"):
                problems.append(f"{lid}: no BisectBatchOnFunctionError")
            if "MaximumRetryAttempts" not in props:
                problems.append(f"{lid}: unbounded retries")
            if not props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination"):
                problems.append(f"{lid}: no on-failure destination")
        if t == "AWS::ApiGatewayV2::Stage":
            rs = props.get("DefaultRouteSettings", {})
            if rs.get("ThrottlingRateLimit") != {"Ref": "ApiThrottleRateLimit"} or rs.get("ThrottlingBurstLimit") != {"Ref": "ApiThrottleBurstLimit"}:
                problems.append(f"{lid}: want DefaultRouteSettings ThrottlingRateLimit from ApiThrottleRateLimit and ThrottlingBurstLimit from ApiThrottleBurstLimit")
    counts = {}
    for r in resources.values():
        counts[r["Type"]] = counts.get(r["Type"], 0) + 1
    for t, n in (("AWS::Lambda::Function", 5), ("AWS::Lambda::EventSourceMapping", 3), ("AWS::ApiGatewayV2::Api", 1),
                 ("AWS::ApiGatewayV2::Stage", 1),
                 ("AWS::Events::Rule", 2)):
        if counts.get(t, 0) != n:
            problems.append(f"want {n} {t}, got {counts.get(t, 0)}")
    if problems:
        print(f"{path}:")
        for p in problems:
            print("FAIL:", p)
        print(f"0 passed, {len(problems)} failed")
        return 1
    print(f"samtranslator transformed {path}: {len(resources)} resources, least-privilege checks passed")
    return 0


def main(paths):
    """Checks each template of paths in turn (one interpreter start for all:
    internal/regionsim checks every deployment variant at once); 1 if any
    fails."""
    status = 0
    for path in paths:
        status |= check(path)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["template.yaml"]))
