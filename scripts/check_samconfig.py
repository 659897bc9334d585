#!/usr/bin/env python3
"""Offline check of samconfig.toml against template.yaml.

`sam build && sam deploy --guided` reads samconfig.toml; this catches a
config that would fail at deploy time: a missing stack name or capability,
a parameter override the template does not declare, or a value outside the
parameter's AllowedValues / MinValue / MaxValue / AllowedPattern. It also
catches a secret committed with it (an override of a NoEcho parameter: pass
those at deploy time, docs/DEPLOYING.md), and a file that no longer names
the parameters a deployer must decide on (DECIDE: in an override or in its
comments).
Exits non-zero with one line per problem.
"""
import re
import shlex
import sys
import tomllib

import yaml


class _Loader(yaml.SafeLoader):
    pass


def _any_tag(loader, suffix, node):  # CloudFormation short tags (!Ref, !If, ...)
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_mapping(node, deep=True)


_Loader.add_multi_constructor("!", _any_tag)

# The parameters whose defaults suit no production stack as they are, or
# that only the deployer can give: who is paged, the secret (named, never
# given), the load the stack admits, the policy and the regions.
DECIDE = ("IdempotencyPolicy", "CrossRegion", "AlarmTopicArn", "KeyHashSecret",
          "ApiThrottleRateLimit", "ApiThrottleBurstLimit", "ApiReservedConcurrency", "LogRetentionDays")


def main(cfg_path="samconfig.toml", tpl_path="template.yaml"):
    with open(cfg_path, "rb") as f:
        raw = f.read()
    cfg = tomllib.loads(raw.decode())
    with open(tpl_path) as f:
        tpl = yaml.load(f, Loader=_Loader)
    params = tpl.get("Parameters", {})
    problems = []
    if "version" not in cfg:
        problems.append("samconfig.toml: no version")
    env = cfg.get("default", {})
    stack = env.get("global", {}).get("parameters", {}).get("stack_name") or env.get("deploy", {}).get("parameters", {}).get("stack_name")
    if not stack:
        problems.append("samconfig.toml: no stack_name for the default environment")
    deploy = env.get("deploy", {}).get("parameters", {})
    caps = deploy.get("capabilities", "")
    caps = caps.split() if isinstance(caps, str) else list(caps)
    if not ({"CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"} & set(caps)):
        problems.append("samconfig.toml: deploy needs CAPABILITY_IAM (the template creates IAM roles)")
    if not (deploy.get("resolve_s3") or deploy.get("s3_bucket")):
        problems.append("samconfig.toml: deploy needs resolve_s3 or s3_bucket for the Go artefacts")
    overrides = deploy.get("parameter_overrides", "")
    items = shlex.split(overrides) if isinstance(overrides, str) else list(overrides)
    for item in items:
        name, _, value = item.partition("=")
        p = params.get(name)
        if p is None:
            problems.append(f"samconfig.toml: parameter_overrides names {name!r}, which template.yaml does not declare")
            continue
        if "AllowedValues" in p and value not in [str(v) for v in p["AllowedValues"]]:
            problems.append(f"samconfig.toml: {name}={value!r} is not one of {p['AllowedValues']}")
        if p.get("Type") == "Number":
            try:
                n = float(value)
            except ValueError:
                problems.append(f"samconfig.toml: {name}={value!r} is not a number")
                continue
            if "MinValue" in p and n < float(p["MinValue"]):
                problems.append(f"samconfig.toml: {name}={value} is below MinValue {p['MinValue']}")
            if "MaxValue" in p and n > float(p["MaxValue"]):
                problems.append(f"samconfig.toml: {name}={value} is above MaxValue {p['MaxValue']}")
        if "AllowedPattern" in p and not re.fullmatch(p["AllowedPattern"], value):
            problems.append(f"samconfig.toml: {name}={value!r} does not match {p['AllowedPattern']}")
    # A secret in any environment's overrides (sam deploy, sam sync, ...).
    for env_name, env_cfg in cfg.items():
        for cmd, section in (env_cfg.items() if isinstance(env_cfg, dict) else []):
            ov = section.get("parameters", {}).get("parameter_overrides", "") if isinstance(section, dict) else ""
            for item in (shlex.split(ov) if isinstance(ov, str) else list(ov)):
                name = item.partition("=")[0]
                if str(params.get(name, {}).get("NoEcho", "")).lower() == "true":
                    problems.append(f"samconfig.toml: [{env_name}.{cmd}.parameters] parameter_overrides gives {name}, a secret (NoEcho): "
                                    "pass it at deploy time, never in a committed file (docs/DEPLOYING.md)")
    text = raw.decode()
    for name in DECIDE:
        if name not in params:
            problems.append(f"check_samconfig.py: DECIDE names {name!r}, which template.yaml does not declare")
        elif not re.search(r"\b" + name + r"\b", text):
            problems.append(f"samconfig.toml: does not name {name}, a parameter every deployer must decide on (in parameter_overrides or its comments)")
    for line in problems:
        print(line)
    if not problems:
        print(f"samconfig.toml: stack {stack!r}, {len(items)} parameter overrides valid against {tpl_path}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
