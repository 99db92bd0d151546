"""Deploys the local stack's stand-in for `sam deploy`: what the CLI reads of a deployed stack.

A deployed capblock stack is, for the `capblock` CLI, two things: a CloudFormation stack whose
`TableName` output names the table and whose parameters (`Mode`, `AccountMonthlyBudget`,
`TeamBudgets`) say how it was deployed, and the settings its functions store in that table when
they run. A purchase from the CLI acts only when the two say the same (docs/operate.md). moto
serves CloudFormation but cannot run template.yaml (a SAM transform of Lambda functions), so
this makes both by hand, as a deploy and the functions' first run would:

1. creates (or updates) a CloudFormation stack named `$CAPBLOCK_STACK` on moto with those
   parameters and the local table, topics and queues as its outputs; its one resource is an
   SSM parameter naming the table (CloudFormation needs a resource; nothing reads it);
2. runs the built `scan-offerings` binary once behind `capblock-local-lambda` with the same
   parameters as its environment (CAPBLOCK_MODE, CAPBLOCK_ACCOUNT_MONTHLY_BUDGET,
   CAPBLOCK_TEAM_BUDGETS), asking it preflight's role check: a function stores the stack's
   settings on every first invocation of a container, and that check buys nothing.

Usage (the local stack's env loaded; `infra/local/stack.sh deploy` does it):
    deploy.py [Mode=dry-run|live] [AccountMonthlyBudget=USD] [TeamBudgets=team=USD,...]
A parameter not given keeps its value (dry-run, 0 and none for a new stack), as
`sam deploy --parameter-overrides` does. Without the binaries (`--bin-dir`, default
`$CARGO_TARGET_DIR/debug`) only step 1 runs, and it says how to build them.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import boto3
from botocore.exceptions import ClientError

# The parameters template.yaml has that the CLI compares, with template.yaml's defaults, and
# the environment variable each one becomes in the functions (template.yaml's Environment).
PARAMETERS = {
    "Mode": ("dry-run", "CAPBLOCK_MODE"),
    "AccountMonthlyBudget": ("0", "CAPBLOCK_ACCOUNT_MONTHLY_BUDGET"),
    "TeamBudgets": ("", "CAPBLOCK_TEAM_BUDGETS"),
}
MODES = ("dry-run", "live")
# How long the function may take to start and to answer the check (a cold debug binary).
START_SECONDS = 30
ANSWER_SECONDS = 60


class DeployError(Exception):
    """A deploy that cannot go on, in words for the operator."""


def overrides(args):
    """The KEY=VALUE arguments as a dict, each key one of PARAMETERS and each value valid."""
    out = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or key not in PARAMETERS:
            raise DeployError(
                f"{arg!r}: give KEY=VALUE with KEY one of {', '.join(PARAMETERS)}"
            )
        if key == "Mode" and value not in MODES:
            raise DeployError(f"Mode={value}: the mode is dry-run or live")
        if key == "AccountMonthlyBudget" and not value.replace(".", "", 1).isdigit():
            raise DeployError(
                f"AccountMonthlyBudget={value}: a number of USD (0: no account cap)"
            )
        out[key] = value
    return out


def template(env):
    """The stand-in's template: the parameters, one inert resource, the local stack as outputs."""
    params = {k: {"Type": "String", "Default": d} for k, (d, _) in PARAMETERS.items()}
    params["Mode"]["AllowedValues"] = list(MODES)
    outputs = {
        "TableName": env["CAPBLOCK_TABLE"],
        "AlertsTopicArn": env["CAPBLOCK_ALERTS_TOPIC_ARN"],
        "WorkloadsTopicArn": env["CAPBLOCK_WORKLOADS_TOPIC_ARN"],
    }
    return json.dumps(
        {
            "Description": "capblock's local stand-in (infra/local/deploy.py): the outputs and parameters the CLI reads",
            "Parameters": params,
            "Resources": {
                "StandIn": {
                    "Type": "AWS::SSM::Parameter",
                    "Properties": {
                        "Name": f"/{env['CAPBLOCK_STACK']}/stand-in/table",
                        "Type": "String",
                        "Value": env["CAPBLOCK_TABLE"],
                    },
                }
            },
            "Outputs": {k: {"Value": v} for k, v in outputs.items()},
        }
    )


def current(cfn, name):
    """The stack's parameters, or None when there is no such stack."""
    try:
        stacks = cfn.describe_stacks(StackName=name)["Stacks"]
    except ClientError as e:
        if "does not exist" in str(e):
            return None
        raise
    return {
        p["ParameterKey"]: p.get("ParameterValue", "")
        for p in stacks[0].get("Parameters", [])
    }


def deploy_stack(cfn, name, env, given):
    """Creates or updates the stand-in; returns the parameters it now has."""
    before = current(cfn, name)
    params = {k: d for k, (d, _) in PARAMETERS.items()}
    params.update(before or {})
    params.update(given)
    as_list = [{"ParameterKey": k, "ParameterValue": v} for k, v in params.items()]
    if before is None:
        cfn.create_stack(StackName=name, TemplateBody=template(env), Parameters=as_list)
    elif before != params:
        cfn.update_stack(StackName=name, TemplateBody=template(env), Parameters=as_list)
    return params


def run_function(bin_dir, params):
    """Runs scan-offerings once with `params` as its environment, asked preflight's check."""
    env = dict(os.environ)
    for key, (_, var) in PARAMETERS.items():
        env[var] = params[key]
    env.setdefault("RUST_LOG", "warn")
    lam = subprocess.Popen(
        [
            os.path.join(bin_dir, "capblock-local-lambda"),
            "--port",
            "0",
            "--name",
            "scan-offerings",
            "--",
            os.path.join(bin_dir, "scan-offerings"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        url = listening_url(lam)
        ask = json.dumps({"source": "capblock.preflight", "asks": []}).encode()
        req = urllib.request.Request(url + "/invoke", data=ask, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=ANSWER_SECONDS) as r:
                r.read()
        except urllib.error.HTTPError as e:
            raise DeployError(
                f"scan-offerings failed its first run: {e.read().decode(errors='replace')[:400]}"
            ) from e
    finally:
        stop(lam)


def stop(lam):
    """Stops capblock-local-lambda, which takes its function down on SIGTERM. A plain blocking
    wait, no timeout: under libfaketime (the date-ahead test run) Python's timed waits and
    sleeps fail with EINVAL (infra/local/future.sh)."""
    lam.terminate()
    lam.wait()


def listening_url(lam):
    """The URL capblock-local-lambda says it listens on (its first line of output)."""
    deadline = time.time() + START_SECONDS
    while time.time() < deadline:
        line = lam.stdout.readline()
        if line.startswith("listening on "):
            return line.split()[-1]
        if not line and lam.poll() is not None:
            break
    raise DeployError(
        "capblock-local-lambda did not start (is the workspace built? cargo build --workspace)"
    )


def main():
    ap = argparse.ArgumentParser(
        description="Deploy the local stack's stand-in for `sam deploy` (the CloudFormation "
        "stack the CLI reads and the settings the functions store).",
        epilog="Example: infra/local/stack.sh deploy Mode=live AccountMonthlyBudget=20000",
    )
    ap.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="Mode=dry-run|live, AccountMonthlyBudget=USD (0: none), TeamBudgets=team=USD,...",
    )
    ap.add_argument(
        "--stack-only",
        action="store_true",
        help="create or update the CloudFormation stack only, silently (stack.sh up does)",
    )
    ap.add_argument(
        "--bin-dir",
        default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "debug"),
        help="where the built capblock-local-lambda and scan-offerings are",
    )
    args = ap.parse_args()
    given = overrides(args.overrides)
    env = os.environ
    missing = [
        v
        for v in (
            "CAPBLOCK_MOTO_URL",
            "CAPBLOCK_STACK",
            "CAPBLOCK_TABLE",
            "CAPBLOCK_ALERTS_TOPIC_ARN",
            "CAPBLOCK_WORKLOADS_TOPIC_ARN",
        )
        if not env.get(v)
    ]
    if missing:
        raise DeployError(
            f"{', '.join(missing)} not set: load the local stack's env (infra/local/stack.sh up)"
        )
    cfn = boto3.client(
        "cloudformation",
        endpoint_url=env["CAPBLOCK_MOTO_URL"],
        region_name=env.get("AWS_REGION", "us-east-1"),
    )
    name = env["CAPBLOCK_STACK"]
    params = deploy_stack(cfn, name, env, given)
    if args.stack_only:
        return
    said = ", ".join(f"{k}={v or '(none)'}" for k, v in params.items())
    print(f"stack {name}: {said}; table {env['CAPBLOCK_TABLE']}", file=sys.stderr)
    binaries = [
        os.path.join(args.bin_dir, b)
        for b in ("capblock-local-lambda", "scan-offerings")
    ]
    if not all(os.access(b, os.X_OK) for b in binaries):
        print(
            f"  the functions are not built in {args.bin_dir}, so the stack's settings are not stored yet: "
            "build them (cargo build --workspace) and deploy again before a purchase from the CLI",
            file=sys.stderr,
        )
        return
    run_function(args.bin_dir, params)
    print(
        f"  scan-offerings ran once and stored the stack's settings; the CLI acts on it with --stack {name}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    try:
        main()
    except DeployError as e:
        print(f"deploy: {e}", file=sys.stderr)
        sys.exit(2)
    except ClientError as e:
        print(f"deploy: CloudFormation on moto: {e}", file=sys.stderr)
        sys.exit(1)
