#!/usr/bin/env python3
"""The CloudWatch dashboard template.yaml deploys, as the JSON CloudWatch receives.

usage: dashboard.py [--template template.yaml] [--stack NAME] [--region R] [--out FILE] [--metrics]

Reads the Dashboard resource's `DashboardBody: !Sub |` block, substitutes what CloudFormation
would (${AWS::StackName}, ${AWS::Region}, ${AWS::AccountId}, ${X} and ${X.Attr} for a resource X
of the template; ${!...} becomes ${...}), checks it parses as JSON with widgets, a default time
range and well-formed widgets, and writes it (stdout or --out). --metrics prints the metric
names the body's SEARCH expressions name, one a line (the integration test compares them with
the EMF lines the functions write). Standard library only: it runs wherever make demo runs.

Names CloudFormation generates (a function's, a queue's, a schedule group's) are rendered as
`<stack>-<LogicalId>-EXAMPLE`; a log group's is its LogGroupName. infra/deploy/test_template.py
renders with markers instead (`ref:X`, `attr:X.Attr`) to check what each widget points at.
"""
import argparse
import json
import re
import sys
from collections.abc import Callable

SUB = re.compile(r"\$\{(!?)([^}]*)\}")
METRIC = re.compile(r'MetricName=\\?"(\w+)\\?"')
# A dashboard's `start`: a time before now as an ISO 8601 duration (CloudWatch's
# "Dashboard Body Structure and Syntax", Overall Structure: e.g. -PT6H, -P7D).
RELATIVE_START = re.compile(r"-P(?!$)(\d+W)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+S)?)?")
WIDGET_TYPES = {"metric", "log", "alarm", "text", "explorer"}


class BodyError(ValueError):
    """The body is not what CloudFormation would deploy, or not what CloudWatch takes."""


def body_text(template: str) -> str:
    lines = template.splitlines()
    start = next(i for i, l in enumerate(lines) if l.strip() == "DashboardBody: !Sub |")
    indent = len(lines[start]) - len(lines[start].lstrip())
    out = []
    for l in lines[start + 1:]:
        if l.strip() and len(l) - len(l.lstrip()) <= indent:
            break
        out.append(l)
    return "\n".join(out)


def resources(template: str) -> dict[str, dict[str, str]]:
    """The template's resources, read from its text (no YAML parser here): logical id -> its
    `Type` and, for a log group, its `LogGroupName` as written."""
    out: dict[str, dict[str, str]] = {}
    lines = template.splitlines()
    try:
        i = lines.index("Resources:")
    except ValueError:
        return out
    current = None
    for l in lines[i + 1:]:
        if l and not l[0].isspace() and not l.startswith("#"):
            break
        if m := re.fullmatch(r"  (\w+):\s*", l):
            current = out.setdefault(m.group(1), {})
        elif current is not None and (m := re.fullmatch(r"\s{4}Type: (\S+)\s*", l)):
            current["Type"] = m.group(1)
        elif current is not None and (m := re.fullmatch(r"\s+LogGroupName: !Sub (\S+)\s*", l)):
            current["LogGroupName"] = m.group(1)
    return out


def cloudformation(template: str, stack: str, region: str, account: str) -> Callable[[str], str]:
    """What CloudFormation substitutes for a `${name}` of the body."""
    found = resources(template)
    pseudo = {"AWS::StackName": stack, "AWS::Region": region, "AWS::AccountId": account}

    def resolve(name: str) -> str:
        if name in pseudo:
            return pseudo[name]
        logical, _, attr = name.partition(".")
        if logical not in found:
            raise BodyError(f"unknown substitution ${{{name}}}")
        kind = found[logical].get("Type", "")
        if attr == "Arn" and kind == "AWS::CloudWatch::Alarm":
            return f"arn:aws:cloudwatch:{region}:{account}:alarm:{stack}-{logical}"
        if not attr and "LogGroupName" in found[logical]:
            return SUB.sub(lambda m: pseudo[m.group(2)], found[logical]["LogGroupName"])
        if attr in ("", "QueueName", "Name"):
            return f"{stack}-{logical}-EXAMPLE"
        raise BodyError(f"no rendering for ${{{name}}} ({kind})")

    return resolve


def markers(name: str) -> str:
    """`ref:X` / `attr:X.Attr` / the pseudo parameter's name: what a test compares with."""
    if name.startswith("AWS::"):
        return name
    return f"attr:{name}" if "." in name else f"ref:{name}"


def render(text: str, resolve: Callable[[str], str], checked: bool = True) -> dict:
    """The body with `${...}` resolved; `checked`: refused (BodyError) unless `check` passes."""

    def sub(m):
        if m.group(1) == "!":
            return "${" + m.group(2) + "}"
        return resolve(m.group(2))

    body = json.loads(SUB.sub(sub, text))
    problems = check(body) if checked else []
    if problems:
        raise BodyError("; ".join(problems))
    return body


def check(body: dict) -> list[str]:
    """What CloudWatch's dashboard body format asks that JSON alone does not say."""
    out = []
    if not isinstance(body.get("widgets"), list) or not body["widgets"]:
        return ["no widgets"]
    start = body.get("start")
    if start is None:
        out.append("no default time range (start)")
    elif not RELATIVE_START.fullmatch(start):
        out.append(f"start {start!r} is not a relative ISO 8601 duration such as -PT24H")
    if body.get("periodOverride", "auto") not in ("auto", "inherit"):
        out.append(f"periodOverride {body['periodOverride']!r}: auto or inherit")
    for i, w in enumerate(body["widgets"]):
        kind, props = w.get("type"), w.get("properties") or {}
        if kind not in WIDGET_TYPES:
            out.append(f"widget {i}: type {kind!r}")
        if kind == "log" and not (props.get("query") and props.get("region")):
            out.append(f"widget {i}: a log widget needs query and region")
        if kind == "metric" and not props.get("metrics") and not props.get("annotations"):
            out.append(f"widget {i}: a metric widget with no metrics")
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--template", default="template.yaml")
    p.add_argument("--stack", default="capblock")
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--account", default="123456789012")
    p.add_argument("--out")
    p.add_argument("--metrics", action="store_true")
    a = p.parse_args()
    with open(a.template, encoding="utf-8") as f:
        template = f.read()
    try:
        body = render(body_text(template), cloudformation(template, a.stack, a.region, a.account))
    except (BodyError, json.JSONDecodeError) as e:
        print(f"dashboard body: {e}", file=sys.stderr)
        return 1
    if a.metrics:
        print("\n".join(sorted(set(METRIC.findall(json.dumps(body))))))
        return 0
    doc = json.dumps(body, indent=2) + "\n"
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(doc)
    else:
        sys.stdout.write(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
