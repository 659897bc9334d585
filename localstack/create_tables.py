#!/usr/bin/env python3
"""Create the DynamoDB tables of template.yaml through the aws CLI.

Used by the LocalStack init hook (init/ready.d/10-idemkit-tables.sh) and by
the CI check against moto (check.sh). Every AWS::DynamoDB::Table and
AWS::DynamoDB::GlobalTable resource becomes a table named PREFIX + logical
ID, with its key schema, attribute definitions, GSIs, billing mode, stream
and TTL. CloudFormation intrinsics are evaluated with parameter defaults
(Ref, Fn::If, Fn::Equals/Not/And/Or, Condition, AWS::NoValue); replication
settings are ignored (one local region). Existing tables are kept, so the
hook can run on every start.
"""
import argparse
import json
import shutil
import subprocess
import sys

try:
    import yaml
except ImportError:
    sys.exit("create_tables.py: PyYAML is not installed for " + sys.executable + " (pip install pyyaml)")

NO_VALUE = object()


class Loader(yaml.SafeLoader):
    pass


def _tag(name):
    def construct(loader, node):
        if isinstance(node, yaml.ScalarNode):
            v = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            v = loader.construct_sequence(node, deep=True)
        else:
            v = loader.construct_mapping(node, deep=True)
        if name == "Fn::GetAtt" and isinstance(v, str):
            v = v.split(".", 1)
        return {name: v}
    return construct


for short in ("Ref", "Condition"):
    Loader.add_constructor("!" + short, _tag(short))
for fn in ("If", "Equals", "Not", "And", "Or", "Sub", "Join", "Select", "Split", "GetAtt", "ImportValue",
           "FindInMap", "Base64", "Cidr", "GetAZs", "EachMemberEquals", "Contains"):
    Loader.add_constructor("!" + fn, _tag("Fn::" + fn))


class Resolver:
    def __init__(self, tmpl):
        self.params = {k: v.get("Default") for k, v in (tmpl.get("Parameters") or {}).items()}
        self.params.update({"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012",
                            "AWS::Partition": "aws", "AWS::StackName": "idemkit", "AWS::URLSuffix": "amazonaws.com"})
        self.conds = tmpl.get("Conditions") or {}
        self.cache = {}

    def cond(self, name):
        if name not in self.cache:
            self.cache[name] = bool(self.value(self.conds[name]))
        return self.cache[name]

    def value(self, v):
        if isinstance(v, list):
            out = [self.value(x) for x in v]
            return [x for x in out if x is not NO_VALUE]
        if not isinstance(v, dict):
            return v
        if len(v) == 1:
            (k, a), = v.items()
            if k == "Ref":
                if a == "AWS::NoValue":
                    return NO_VALUE
                return self.params.get(a, a)
            if k == "Condition":
                return self.cond(a)
            if k == "Fn::If":
                return self.value(a[1] if self.cond(a[0]) else a[2])
            if k == "Fn::Equals":
                x, y = (self.value(e) for e in a)
                return str(x) == str(y)
            if k == "Fn::Not":
                return not self.value(a[0])
            if k == "Fn::And":
                return all(self.value(e) for e in a)
            if k == "Fn::Or":
                return any(self.value(e) for e in a)
        out = {k: self.value(x) for k, x in v.items()}
        return {k: x for k, x in out.items() if x is not NO_VALUE}


def aws(args, endpoint, region, check=True):
    cmd = ["aws", "--endpoint-url", endpoint, "--region", region, "--output", "json"] + args
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def create_input(name, p):
    inp = {
        "TableName": name,
        "AttributeDefinitions": p["AttributeDefinitions"],
        "KeySchema": p["KeySchema"],
        "BillingMode": p.get("BillingMode", "PROVISIONED"),
    }
    if inp["BillingMode"] == "PROVISIONED":
        inp["ProvisionedThroughput"] = p.get("ProvisionedThroughput", {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5})
    gsis = []
    for g in p.get("GlobalSecondaryIndexes", []):
        gi = {"IndexName": g["IndexName"], "KeySchema": g["KeySchema"], "Projection": g["Projection"]}
        if inp["BillingMode"] == "PROVISIONED":
            gi["ProvisionedThroughput"] = g.get("ProvisionedThroughput", {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5})
        gsis.append(gi)
    if gsis:
        inp["GlobalSecondaryIndexes"] = gsis
    stream = p.get("StreamSpecification")
    if stream and stream.get("StreamViewType"):
        inp["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    return inp


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--template", default="template.yaml")
    ap.add_argument("--endpoint-url", required=True)
    ap.add_argument("--region", default="us-east-1")
    ap.add_argument("--prefix", default="idemkit-")
    a = ap.parse_args()
    if shutil.which("aws") is None:
        sys.exit("create_tables.py: the aws CLI is not installed (not on PATH); it creates the tables (v1 or v2)")
    with open(a.template) as f:
        tmpl = yaml.load(f, Loader=Loader)
    r = Resolver(tmpl)
    made = 0
    for lid, res in sorted(tmpl["Resources"].items()):
        if res.get("Type") not in ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable"):
            continue
        p = r.value(res.get("Properties", {}))
        name = a.prefix + lid
        if aws(["dynamodb", "describe-table", "--table-name", name], a.endpoint_url, a.region, check=False).returncode == 0:
            print(f"{lid}\t{name}\t(exists)")
            continue
        made_it = aws(["dynamodb", "create-table", "--cli-input-json", json.dumps(create_input(name, p))], a.endpoint_url, a.region, check=False)
        if made_it.returncode != 0 and "ResourceInUseException" in made_it.stderr:
            # Another client (idemkit dev started early) created it since
            # the describe above: it creates the same table, TTL included.
            print(f"{lid}\t{name}\t(exists: created meanwhile)")
            continue
        if made_it.returncode != 0:
            raise subprocess.CalledProcessError(made_it.returncode, made_it.args, made_it.stdout, made_it.stderr)
        aws(["dynamodb", "wait", "table-exists", "--table-name", name], a.endpoint_url, a.region)
        ttl = p.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled"):
            aws(["dynamodb", "update-time-to-live", "--table-name", name, "--time-to-live-specification",
                 json.dumps({"Enabled": True, "AttributeName": ttl["AttributeName"]})], a.endpoint_url, a.region)
        made += 1
        print(f"{lid}\t{name}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as e:
        sys.stderr.write(f"aws {' '.join(e.cmd[1:])} failed:\n{e.stderr}\n")
        sys.exit(1)
