#!/usr/bin/env python3
"""The CloudWatch dashboard template.yaml deploys, as the JSON CloudWatch receives.

usage: dashboard.py [--template template.yaml] [--stack NAME] [--region R] [--out FILE] [--metrics]

Reads the Dashboard resource's `DashboardBody: !Sub |` block, substitutes what CloudFormation
would (${AWS::StackName}, ${AWS::Region}, ${X.Arn}; ${!...} becomes ${...}), checks it parses
as JSON with widgets, and writes it (stdout or --out). --metrics prints the metric names the
body's SEARCH expressions name, one a line (the integration test compares them with the EMF
lines the functions write). Standard library only: it runs wherever make demo runs.
"""
import argparse
import json
import re
import sys

SUB = re.compile(r"\$\{(!?)([^}]*)\}")
METRIC = re.compile(r'MetricName=\\?"(\w+)\\?"')


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


def render(text: str, stack: str, region: str, account: str) -> dict:
    def sub(m):
        if m.group(1) == "!":
            return "${" + m.group(2) + "}"
        name = m.group(2)
        if name == "AWS::StackName":
            return stack
        if name == "AWS::Region":
            return region
        if name.endswith(".Arn"):
            return f"arn:aws:cloudwatch:{region}:{account}:alarm:{stack}-{name[:-4]}"
        raise SystemExit(f"dashboard body: unknown substitution ${{{name}}}")

    body = json.loads(SUB.sub(sub, text))
    if not isinstance(body.get("widgets"), list) or not body["widgets"]:
        raise SystemExit("dashboard body: no widgets")
    return body


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
        text = body_text(f.read())
    body = render(text, a.stack, a.region, a.account)
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
