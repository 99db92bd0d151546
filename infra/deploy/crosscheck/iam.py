"""IAM from declared tables, not from the code's layout.

- Each AWS adapter (`shared/src/aws/<name>.rs`, or the folder `shared/src/aws/<name>/`, with
  its child modules) declares `pub const ACTIONS: &[(&str, &[&str])]`: for each port trait it
  implements, the IAM actions that port's methods need.
- `check_adapter`: every SDK operation the adapter's deployed code calls has its action in that
  table, and every declared action is called or implied by a call (IMPLIED); so the table is
  neither short nor stale, wherever the calls sit inside the adapter.
- Each function crate declares `pub const AWS_PORTS: &[&str]`, the ports it uses; it must build
  an adapter of each declared port's module and declare a port of each adapter it builds. It
  builds an adapter by naming one of its pub structs, or by calling, through the adapter's
  module, one of its free pub fns that return a port's value (`accounts::member_markets(..)`:
  `rust.port_builders`). A function that builds the shared `Adapters` (shared/src/lambda.rs)
  builds every adapter type named there.
- `check_function`: its role in template.yaml allows exactly the actions of its ports (no
  wildcard, no NotAction, nothing of ec2/dynamodb/sns/scheduler or iam:PassRole unneeded), and
  the function makes no SDK call of its own.
- `check_scope`: `Resource: '*'` only on actions without resource-level permissions.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

from .cfn import as_list, deep_get, is_star, policy_statements
from .rust import (
    declared_actions,
    declared_ports,
    deployed_code,
    port_builders,
    read_rust,
    rust_files,
    strip_tests,
)
from .sdk import (
    IAM_PREFIX,
    IMPLIED,
    NOT_ACTIONS,
    Sdk,
    action_of,
    sdk_calls,
    sdk_services,
)

# Services whose allowed-but-unneeded actions fail (plus every service an adapter declares).
CHECKED_SERVICES = {"ec2", "dynamodb", "sns", "scheduler"}


@dataclass
class Adapter:
    """One adapter module: `aws/<name>.rs` and/or `aws/<name>/**.rs`."""

    name: str
    paths: list[Path]
    actions: dict[str, list[str]] | None  # port -> actions; None: no table
    types: set[str] = field(default_factory=set)  # its pub structs: what a function builds
    builders: set[str] = field(default_factory=set)  # its free pub fns that return a port's value

    def code(self) -> str:
        return deployed_code(self.paths)

    def built_in(self, code: str) -> bool:
        """Whether `code` builds this adapter: names one of its structs, or calls one of its
        builders through its module (`accounts::member_markets`, in a path or a `use`)."""
        return any(re.search(rf"\b{t}\b", code) for t in self.types) or \
            any(re.search(rf"\b{self.name}::{b}\b", code) for b in self.builders)

    def what_builds(self) -> str:
        return ", ".join(sorted(self.types) + [f"{self.name}::{b}()" for b in sorted(self.builders)])


def load_adapters(aws_dir: Path) -> dict[str, Adapter]:
    names = {p.stem for p in aws_dir.glob("*.rs") if p.stem != "mod"}
    names |= {d.name for d in aws_dir.iterdir() if d.is_dir()} if aws_dir.is_dir() else set()
    out = {}
    for name in sorted(names):
        paths = [p for p in [aws_dir / f"{name}.rs"] if p.is_file()] + rust_files(aws_dir / name)
        actions: dict[str, list[str]] | None = None
        types: set[str] = set()
        builders: set[str] = set()
        for p in paths:
            text = p.read_text(encoding="utf-8")
            table = declared_actions(text)
            if table is not None:
                actions = {**(actions or {}), **table}
            code = read_rust(p).code
            types |= set(re.findall(r"\bpub\s+struct\s+([A-Z]\w*)", code))
            builders |= port_builders(strip_tests(code))
        out[name] = Adapter(name, paths, actions, types, builders)
    return out


def port_actions(adapters: dict[str, Adapter]) -> dict[str, tuple[str, list[str]]]:
    """port -> (adapter name, actions)."""
    return {port: (a.name, acts) for a in adapters.values() for port, acts in (a.actions or {}).items()}


# The adapter that tries a function's own role for preflight (`aws/probe.rs`): it calls the
# actions the other adapters declare, never one of its own, and a function that builds it needs
# nothing more (it tries only the actions of the function's own ports).
PROBE = "probe"


def check_adapter(a: Adapter, sdk: Sdk, others: set[str] | None = None) -> tuple[list[str], list[str]]:
    """Problems and notes: the adapter's SDK calls against its declared table (for the probe,
    against `others`, every other adapter's declared actions)."""
    code = a.code()
    services = sdk_services(code)
    calls, notes = sdk_calls(code, services, sdk)
    called: dict[str, str] = {}  # action -> the operation
    for svc, ops in calls.items():
        for op in sorted(ops):
            if action_of(svc, op, sdk) not in NOT_ACTIONS:
                called.setdefault(action_of(svc, op, sdk), f"{op}()")
            for isvc, iop, rx, extra in IMPLIED:
                if isvc == svc and iop == op and (rx is None or re.search(rx, code)):
                    for e in extra:
                        called.setdefault(e, f"implied by {op}()")
    if a.name == PROBE:
        stray = sorted(act for act in called if act not in (others or set()))
        return [f"tries {act}, which no adapter's ACTIONS declares (no role needs it)" for act in stray], notes
    if a.actions is None:
        return ([f"calls {', '.join(sorted(called))} but declares no ACTIONS table"] if called else []), notes
    declared = {x for acts in a.actions.values() for x in acts}
    problems = [f"undeclared SDK call: {why} needs {act}; add it to ACTIONS under the port that calls it"
                for act, why in sorted(called.items()) if act not in declared]
    problems += [f"declared but never called: {act} (remove it from ACTIONS)"
                 for act in sorted(declared - set(called))]
    bad = sorted(x for x in declared if not re.fullmatch(r"[a-z0-9-]+:[A-Za-z0-9]+", x))
    problems += [f"not an IAM action: {x!r}" for x in bad]
    return problems, notes


@dataclass
class Needs:
    required: dict[str, str]  # action -> the port that needs it
    problems: list[str]
    notes: list[str]


def function_needs(src: Path, adapters: dict[str, Adapter], sdk: Sdk) -> Needs:
    """The actions a function needs: those of the ports it declares (AWS_PORTS)."""
    paths = rust_files(src)
    code = deployed_code(paths)
    problems: list[str] = []
    ports = None
    for p in paths:
        ports = declared_ports(p.read_text(encoding="utf-8")) if ports is None else ports
    by_port = port_actions(adapters)
    built = {a.name for a in adapters.values() if a.built_in(code)}
    edge = src.parent.parent.parent / "shared" / "src" / "lambda.rs"
    # The shared adapters, built directly or by the edge every function stands behind.
    if re.search(r"\b(Adapters::(new|with_sdk)|Edge::(new|with_sdk))\(", code) and edge.is_file():
        shared = deployed_code([edge])
        built |= {a.name for a in adapters.values() if a.built_in(shared)}
    required: dict[str, str] = {}
    if ports is None:
        problems.append(f"{src}: declares no `pub const AWS_PORTS` (the ports of the AWS adapters it uses)")
        ports = []
    for port in ports:
        if port not in by_port:
            problems.append(f"AWS_PORTS names {port}, which no adapter's ACTIONS table declares")
            continue
        adapter, acts = by_port[port]
        if adapter not in built:
            problems.append(f"AWS_PORTS names {port} but the function builds no {adapter} adapter "
                            f"({adapters[adapter].what_builds()})")
        for act in acts:
            required.setdefault(act, port)
    for name in sorted(built - {PROBE}):
        if not any(by_port.get(p, ("",))[0] == name for p in ports):
            problems.append(f"builds the {name} adapter ({adapters[name].what_builds()}) "
                            "but declares none of its ports in AWS_PORTS")
    # A function reaches AWS only through adapters, whose tables say what it needs.
    own, notes = sdk_calls(code, sdk_services(code), sdk)
    for svc, ops in sorted(own.items()):
        problems += [f"calls {op}() of aws-sdk-{svc} itself: call it in an adapter and declare its action"
                     for op in sorted(ops)]
    return Needs(required, problems, [f"ports: {', '.join(ports) or 'none'}", *notes])


def allowed_actions(fid: str, fn: dict, resources: dict) -> tuple[dict[str, tuple[str, dict]], list[dict], list[str], list[str]]:
    """lower-case action -> (as written, statement); the Allow statements; problems; notes."""
    stmts, notes = policy_statements(fid, fn, resources)
    allow = [s for s in stmts if s.get("Effect") == "Allow"]
    allowed: dict[str, tuple[str, dict]] = {}
    problems: list[str] = []
    for s in allow:
        if "NotAction" in s:
            problems.append(f"statement {s.get('Sid', '?')}: NotAction is not allowed")
        for a in as_list(s.get("Action")):
            if not isinstance(a, str):
                problems.append(f"statement {s.get('Sid', '?')}: non-literal action {a!r}")
                continue
            if "*" in a or "?" in a:
                problems.append(f"statement {s.get('Sid', '?')}: wildcard action {a}")
            allowed[a.lower()] = (a, s)
    return allowed, allow, problems, notes


def compare(required: dict[str, str], allowed: dict[str, tuple[str, dict]], services: set[str]) -> list[str]:
    """Missing and extra grants."""
    problems = [f"not allowed: {act} (needed by port {port})" for act, port in sorted(required.items())
                if not any(fnmatch.fnmatchcase(act.lower(), a) for a in allowed)]
    prefixes = {IAM_PREFIX.get(s, s) for s in services}
    needed = {r.lower() for r in required}
    for a, (written, s) in sorted(allowed.items()):
        checked = a == "iam:passrole" or a.split(":", 1)[0] in prefixes
        if checked and a not in needed:
            problems.append(f"allowed but never needed: {written} (statement {s.get('Sid', '?')})")
    return problems


def check_scope(allow: list[dict], action_data: dict | None) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    notes = [] if action_data is not None else \
        ["cfn-lint not importable: resource-level data unavailable, only EC2 Describe* accepted on '*'"]
    for s in allow:
        if not is_star(s.get("Resource")):
            continue
        for a in as_list(s.get("Action")):
            if not isinstance(a, str) or ":" not in a:
                continue
            svc, act = a.split(":", 1)
            if action_data is not None:
                info = deep_get(action_data, svc.lower(), "Actions", act.lower())
                ok = info is not None and not info.get("Resources")
            else:
                ok = svc == "ec2" and act.startswith("Describe")
            if not ok:
                problems.append(f"statement {s.get('Sid', '?')}: {a} on Resource '*' "
                                "(it has resource-level permissions: scope it)")
    return problems, notes


def check_known(allow: list[dict], action_data: dict | None, declared: set[str]) -> tuple[list[str], list[str]]:
    """Every action a role allows or an adapter declares is one IAM knows, and an EC2 action is
    allowed only on resource types it is authorized on: a statement that allows nothing reads as
    a permission and hides a missing one."""
    if action_data is None:
        return [], ["cfn-lint not importable: actions and resource types not checked against IAM's data"]
    problems: list[str] = []
    named = {a for s in allow for a in as_list(s.get("Action")) if isinstance(a, str) and ":" in a} | declared
    for a in sorted(named):
        svc, act = a.split(":", 1)
        if "*" in act:
            continue
        if deep_get(action_data, svc.lower(), "Actions", act.lower()) is None:
            problems.append(f"{a} is not an IAM action (the Service Authorization Reference has no such action)")
    for s in allow:
        # An ARN written with !Sub is checked by its text: the resource type is literal.
        resources = [r.get("Fn::Sub") if isinstance(r, dict) else r for r in as_list(s.get("Resource"))]
        resources = [r for r in resources if isinstance(r, str)]
        for a in as_list(s.get("Action")):
            if not isinstance(a, str) or not a.startswith("ec2:"):
                continue
            info = deep_get(action_data, "ec2", "Actions", a.split(":", 1)[1].lower())
            kinds = {k.lower() for k in (info or {}).get("Resources", [])}
            if not kinds:
                continue
            for r in resources:
                m = re.search(r":([a-z-]+)/[^:]*$", r) if ":ec2:" in r else None
                if m and m.group(1) not in kinds:
                    problems.append(f"statement {s.get('Sid', '?')}: {a} on {m.group(1)}/* allows nothing "
                                    f"(IAM authorizes it on {', '.join(sorted(kinds))})")
    return problems, []
