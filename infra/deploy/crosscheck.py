#!/usr/bin/env python3
"""Cross-checks template.yaml against the Rust code it deploys.

For every AWS::Serverless::Function in the template:

  code   CodeUri / Metadata.BuildProperties.Binary point at functions/<binary>/, a
         workspace member whose Cargo.toml declares a binary of that name, built
         with BuildMethod rust-cargolambda.
  env    The CAPBLOCK_* string literals in functions/<binary>/src/ equal the
         function's Environment.Variables (Globals merged), RUST_LOG excepted.
  iam    Every SDK operation the function can reach (its own src/ plus the
         shared/src/aws/<module>.rs adapters whose pub types its src names) is
         allowed by the function's policy statements, and every allowed action of
         those services is actually called. No wildcard actions.
  scope  `Resource: '*'` only on actions that have no resource-level permission
         (per cfn-lint's IAM action data).

Also: every functions/<name>/ crate is deployed by some function in the template.
Prints the problems per function and ends with `N passed, M failed`; exits 1 if
any check failed. Needs PyYAML (and cfn-lint for the scope check): run it through
infra/deploy/crosscheck.sh, which uses the deploy venv.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import yaml

# --------------------------------------------------------------------------- YAML


class CfnLoader(yaml.SafeLoader):
    """SafeLoader that understands CloudFormation short-form intrinsics (!Ref ...)."""


def _intrinsic(loader: yaml.Loader, tag_suffix: str, node: yaml.Node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if tag_suffix == "Ref":
        return {"Ref": value}
    if tag_suffix == "Condition":
        return {"Condition": value}
    if tag_suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{tag_suffix}": value}


CfnLoader.add_multi_constructor("!", _intrinsic)


def load_template(path: Path) -> dict:
    with path.open(encoding="utf-8") as fh:
        return yaml.load(fh, Loader=CfnLoader)  # noqa: S506 - SafeLoader subclass


# --------------------------------------------------------------------------- Rust source


@dataclass
class RustSource:
    code: str  # comments removed, string/char literal contents blanked
    strings: list[str]  # string literal contents (in order)


def lex_rust(text: str) -> RustSource:
    """Splits Rust source into code (no comments, literals emptied) and string literals.

    Handles line and nested block comments, "..." with escapes, raw strings r#"..."#,
    byte strings, char literals and lifetimes well enough for grepping.
    """
    out: list[str] = []
    strings: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if text[i] == "\n":
                        out.append("\n")
                    i += 1
            out.append(" ")
            continue
        m = re.match(r'(b|c)?r(#*)"', text[i:i + 300]) if c in "brc" else None
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = m.group(2)
            start = i + m.end()
            end = text.find('"' + hashes, start)
            end = n if end < 0 else end
            strings.append(text[start:end])
            out.append('""' + "\n" * text.count("\n", start, end))
            i = end + 1 + len(hashes)
            continue
        if c == '"' or (c in "bc" and text.startswith('"', i + 1) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))):
            j = i + (1 if c == '"' else 2)
            buf = []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    buf.append(text[j:j + 2])
                    j += 2
                else:
                    buf.append(text[j])
                    j += 1
            s = "".join(buf)
            strings.append(s)
            out.append('""' + "\n" * s.count("\n"))
            i = j + 1
            continue
        if c == "'":
            # char literal ('a', '\n', '\u{..}') or a lifetime ('a)
            m = re.match(r"'(\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'", text[i:i + 16])
            if m:
                out.append("' '")
                i += m.end()
                continue
        out.append(c)
        i += 1
    return RustSource("".join(out), strings)


def read_rust(path: Path) -> RustSource:
    return lex_rust(path.read_text(encoding="utf-8"))


def strip_items(code: str, pattern: str) -> str:
    """Removes every item whose header matches `pattern` up to its matching closing brace
    (or its terminating semicolon when it has no body)."""
    rx = re.compile(pattern)
    while True:
        m = rx.search(code)
        if not m:
            return code
        j = m.end()
        while j < len(code) and code[j] not in "{;":
            j += 1
        if j >= len(code) or code[j] == ";":
            code = code[:m.start()] + code[j + 1:]
            continue
        depth = 0
        k = j
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        code = code[:m.start()] + code[k + 1:]


def strip_tests(code: str) -> str:
    return strip_items(code, r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?(mod|fn|impl|use)\b")


def strip_fn(code: str, name: str) -> str:
    return strip_items(code, r"(pub(\([^)]*\))?\s+)?(async\s+)?fn\s+" + re.escape(name) + r"\b")


# --------------------------------------------------------------------------- SDK operations

# aws-sdk-<crate> -> IAM service prefix, where they differ.
IAM_PREFIX = {"cloudwatchlogs": "logs", "eventbridge": "events", "sfn": "states", "cloudwatch": "cloudwatch"}

# Used when the SDK crate's source is not in the cargo registry (not fetched yet).
FALLBACK_OPERATIONS = {
    "scheduler": [
        "create_schedule", "create_schedule_group", "delete_schedule", "delete_schedule_group",
        "get_schedule", "get_schedule_group", "list_schedule_groups", "list_schedules",
        "list_tags_for_resource", "tag_resource", "untag_resource", "update_schedule",
    ],
    "sns": [
        "publish", "publish_batch", "subscribe", "unsubscribe", "create_topic", "delete_topic",
        "get_topic_attributes", "set_topic_attributes", "list_topics", "list_subscriptions",
        "list_subscriptions_by_topic", "confirm_subscription", "get_subscription_attributes",
        "set_subscription_attributes",
    ],
    "dynamodb": [
        "batch_get_item", "batch_write_item", "create_table", "delete_item", "delete_table",
        "describe_table", "describe_time_to_live", "execute_statement", "get_item", "put_item",
        "query", "scan", "transact_get_items", "transact_write_items", "update_item",
        "update_table", "update_time_to_live",
    ],
}

# Extra IAM actions an operation needs, depending on what the adapter passes to it.
#   (service, operation, regex over the module's code or None, implied actions)
IMPLIED = [
    ("dynamodb", "transact_write_items", r"\bConditionCheck::builder\b", ["dynamodb:ConditionCheckItem"]),
    ("dynamodb", "transact_write_items", r"\bPut::builder\b", ["dynamodb:PutItem"]),
    ("dynamodb", "transact_write_items", r"\bUpdate::builder\b", ["dynamodb:UpdateItem"]),
    ("dynamodb", "transact_write_items", r"\bDelete::builder\b", ["dynamodb:DeleteItem"]),
    ("ec2", "purchase_capacity_block", r"\bTagSpecification\b", ["ec2:CreateTags"]),
    ("scheduler", "create_schedule", None, ["iam:PassRole"]),
    ("scheduler", "update_schedule", None, ["iam:PassRole"]),
]


def pascal(snake: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in snake.split("_"))


class Sdk:
    """Operation names of aws-sdk-<service> crates, read from the cargo registry."""

    def __init__(self, registry: Path | None, lock: dict):
        self.registry = registry
        self.versions = {p["name"]: p["version"] for p in lock.get("package", [])}
        self.cache: dict[str, dict[str, str] | None] = {}
        self.notes: list[str] = []

    def operations(self, service: str) -> dict[str, str] | None:
        """snake_case operation -> API operation name, or None if unknown."""
        if service in self.cache:
            return self.cache[service]
        ops = self._from_registry(service)
        if ops is None and service in FALLBACK_OPERATIONS:
            ops = {o: pascal(o) for o in FALLBACK_OPERATIONS[service]}
            self.notes.append(f"aws-sdk-{service} not in the cargo registry: using the built-in operation list")
        self.cache[service] = ops
        return ops

    def _from_registry(self, service: str) -> dict[str, str] | None:
        if not self.registry or not self.registry.is_dir():
            return None
        crate = f"aws-sdk-{service}"
        want = self.versions.get(crate)
        candidates = []
        for index in self.registry.iterdir():
            candidates += [d for d in index.glob(f"{crate}-*") if re.fullmatch(re.escape(crate) + r"-\d+\.\d+\.\d+", d.name)]
        if not candidates:
            return None
        exact = [d for d in candidates if want and d.name == f"{crate}-{want}"]
        if exact:
            chosen = exact[0]
        else:
            chosen = max(candidates, key=lambda d: tuple(int(x) for x in d.name.rsplit("-", 1)[1].split(".")))
            if want:
                self.notes.append(f"{crate} {want} (Cargo.lock) not in the registry: using {chosen.name}")
        opdir = chosen / "src" / "operation"
        ops: dict[str, str] = {}
        for d in opdir.iterdir() if opdir.is_dir() else []:
            if not d.is_dir():
                continue
            name = pascal(d.name)
            rs = opdir / f"{d.name}.rs"
            if rs.is_file():
                m = re.search(r'Metadata::new\(\s*"(\w+)"', rs.read_text(encoding="utf-8", errors="replace"))
                if m:
                    name = m.group(1)
            ops[d.name] = name
        return ops or None


# --------------------------------------------------------------------------- repo model


@dataclass
class Module:
    name: str
    path: Path
    code: str
    types: set[str]
    services: set[str]


def sdk_services(code: str) -> set[str]:
    return set(re.findall(r"\baws_sdk_(\w+?)::", code))


def load_modules(aws_dir: Path) -> dict[str, Module]:
    mods: dict[str, Module] = {}
    for p in sorted(aws_dir.glob("*.rs")) if aws_dir.is_dir() else []:
        src = read_rust(p)
        code = strip_fn(strip_tests(src.code), "create_table")  # local-dev helper, not deployed
        types = set(re.findall(r"\bpub\s+(?:struct|enum|trait)\s+([A-Z]\w*)", code))
        mods[p.stem] = Module(p.stem, p, code, types, sdk_services(code))
    return mods


def used_modules(fn_code: str, mods: dict[str, Module]) -> list[Module]:
    used = {m.name for m in mods.values() if any(re.search(rf"\b{t}\b", fn_code) for t in m.types)}
    # plus the sibling modules those modules use (super::x / crate::aws::x / x::)
    frontier = list(used)
    while frontier:
        m = mods[frontier.pop()]
        for other in mods:
            if other not in used and other != "mod" and re.search(rf"(\bsuper::|\bcrate::aws::|\baws::){other}\b", m.code):
                used.add(other)
                frontier.append(other)
    return [mods[n] for n in sorted(used)]


def sdk_calls(code: str, services: set[str], sdk: Sdk) -> tuple[dict[str, set[str]], list[str]]:
    """service -> called operations (snake_case); problems."""
    calls: dict[str, set[str]] = {}
    problems: list[str] = []
    methods = set(re.findall(r"\.\s*([a-z_][a-z0-9_]*)\s*(?:::\s*<[^>]*>\s*)?\(", code))
    for svc in sorted(services):
        ops = sdk.operations(svc)
        if ops is None:
            # last resort: methods called directly on something named client
            found = set(re.findall(r"\bclient\b(?:\s*\([^()]*\))?\s*\.\s*([a-z_][a-z0-9_]*)\s*\(", code))
            found -= {"clone", "config", "as_ref"}
            problems.append(f"aws-sdk-{svc}: operation list unavailable (crate not fetched); guessed calls from `client.op(` only")
            calls[svc] = found
        else:
            calls[svc] = methods & set(ops)
    return calls, problems


# --------------------------------------------------------------------------- template model


def deep_get(d, *keys, default=None):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def as_list(v) -> list:
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def ref_target(v) -> str | None:
    if isinstance(v, dict):
        if "Ref" in v:
            return v["Ref"]
        if "Fn::GetAtt" in v:
            return as_list(v["Fn::GetAtt"])[0]
    return None


def policy_statements(fn_id: str, fn: dict, resources: dict) -> tuple[list[dict], list[str]]:
    """Allow/Deny statements that apply to the function's role; notes on unverifiable parts."""
    stmts: list[dict] = []
    notes: list[str] = []
    props = fn.get("Properties", {})

    def add_doc(doc, where):
        if isinstance(doc, dict) and "Statement" in doc:
            stmts.extend(s for s in as_list(doc["Statement"]) if isinstance(s, dict))
        else:
            notes.append(f"{where}: not an inline policy document, not verified")

    for i, p in enumerate(as_list(props.get("Policies"))):
        if isinstance(p, str):
            notes.append(f"Policies[{i}] managed policy {p} not verified")
        elif isinstance(p, dict) and "Statement" in p:
            add_doc(p, f"Policies[{i}]")
        elif isinstance(p, dict):
            notes.append(f"Policies[{i}] SAM policy template {', '.join(p)} not verified")
    role = props.get("Role")
    if role is not None:
        rid = ref_target(role)
        rres = resources.get(rid) if rid else None
        if not rres or rres.get("Type") != "AWS::IAM::Role":
            notes.append(f"Role {role!r} is not a role of this template, not verified")
        else:
            for j, p in enumerate(as_list(deep_get(rres, "Properties", "Policies"))):
                add_doc(p.get("PolicyDocument") if isinstance(p, dict) else None, f"{rid}.Policies[{j}]")
            for arn in as_list(deep_get(rres, "Properties", "ManagedPolicyArns")):
                notes.append(f"{rid} managed policy {arn!r} not verified")
            for oid, o in resources.items():
                if o.get("Type") in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy"):
                    roles = as_list(deep_get(o, "Properties", "Roles")) + as_list(deep_get(o, "Properties", "RoleName"))
                    if any(ref_target(r) == rid for r in roles):
                        add_doc(deep_get(o, "Properties", "PolicyDocument"), oid)
    return stmts, notes


def is_star(resource) -> bool:
    return any(r == "*" for r in as_list(resource))


def load_action_data() -> dict | None:
    try:
        import cfnlint  # noqa: PLC0415

        p = Path(cfnlint.__file__).parent / "data" / "AdditionalSpecs" / "Policies.json"
        return json.loads(p.read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - optional dependency
        return None


# --------------------------------------------------------------------------- checks


@dataclass
class Report:
    passed: int = 0
    failed: int = 0
    lines: list[str] = field(default_factory=list)

    def check(self, scope: str, name: str, problems: list[str], notes: list[str] | None = None):
        if problems:
            self.failed += 1
            self.lines.append(f"  FAIL {name}")
            self.lines += [f"       - {p}" for p in problems]
        else:
            self.passed += 1
            self.lines.append(f"  ok   {name}")
        self.lines += [f"       note: {x}" for x in notes or []]


def crate_binaries(crate: Path) -> tuple[str | None, set[str]]:
    data = tomllib.loads((crate / "Cargo.toml").read_text(encoding="utf-8"))
    pkg = deep_get(data, "package", "name")
    explicit = [b for b in data.get("bin", []) if isinstance(b, dict) and b.get("name")]
    bins = {b["name"] for b in explicit}
    # paths the explicit [[bin]] targets take (cargo's defaults when `path` is absent)
    taken = {Path(b.get("path") or ("src/main.rs" if b["name"] == pkg else f"src/bin/{b['name']}.rs")).as_posix()
             for b in explicit}
    if data.get("package", {}).get("autobins", True):
        if (crate / "src" / "main.rs").is_file() and pkg and "src/main.rs" not in taken:
            bins.add(pkg)
        bins |= {p.stem for p in (crate / "src" / "bin").glob("*.rs") if f"src/bin/{p.name}" not in taken}
    return pkg, {b for b in bins if b}


def workspace_members(repo: Path) -> set[Path]:
    p = repo / "Cargo.toml"
    if not p.is_file():
        return set()
    data = tomllib.loads(p.read_text(encoding="utf-8"))
    out = set()
    for m in deep_get(data, "workspace", "members", default=[]):
        out |= {d.resolve() for d in repo.glob(m)}
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = Path(__file__).resolve().parent
    ap.add_argument("--repo", type=Path, default=here.parent.parent, help="repository root (default: this checkout)")
    ap.add_argument("--template", type=Path, help="template (default: <repo>/template.yaml)")
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    ap.add_argument("--registry", type=Path, default=cargo_home / "registry" / "src",
                    help="cargo registry sources, for the SDK operation lists (default: $CARGO_HOME/registry/src)")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every needed action and where it is called")
    args = ap.parse_args(argv)

    repo = args.repo.resolve()
    template_path = (args.template or repo / "template.yaml").resolve()
    tpl = load_template(template_path)
    resources: dict = tpl.get("Resources", {})
    globals_fn = deep_get(tpl, "Globals", "Function", default={}) or {}
    lock = tomllib.loads((repo / "Cargo.lock").read_text(encoding="utf-8")) if (repo / "Cargo.lock").is_file() else {}
    sdk = Sdk(args.registry, lock)
    modules = load_modules(repo / "shared" / "src" / "aws")
    members = workspace_members(repo)
    action_data = load_action_data()
    # services whose allowed-but-uncalled actions are reported (plus any SDK the code uses)
    checked_services = {"ec2", "dynamodb", "sns", "scheduler"}
    for m in modules.values():
        checked_services |= m.services
    rep = Report()
    deployed: set[Path] = set()

    functions = {k: v for k, v in resources.items() if isinstance(v, dict) and v.get("Type") == "AWS::Serverless::Function"}
    print(f"crosscheck: {template_path.relative_to(repo) if template_path.is_relative_to(repo) else template_path}: "
          f"{len(functions)} functions; adapters: " +
          ", ".join(f"{m.name}.rs ({'/'.join(sorted(m.types)) or '-'})" for m in modules.values() if m.types))

    for fid, fn in functions.items():
        props = fn.get("Properties", {}) or {}
        meta = fn.get("Metadata", {}) or {}
        rep.lines.append(f"{fid}:")

        # ---- (a) code location
        problems: list[str] = []
        code_uri = props.get("CodeUri", globals_fn.get("CodeUri"))
        binary = deep_get(meta, "BuildProperties", "Binary")
        crate: Path | None = None
        if meta.get("BuildMethod") != "rust-cargolambda":
            problems.append(f"Metadata.BuildMethod is {meta.get('BuildMethod')!r}, expected 'rust-cargolambda'")
        if props.get("Handler", globals_fn.get("Handler")) != "bootstrap":
            problems.append("Handler must be 'bootstrap' for provided.al2023")
        if not isinstance(code_uri, str):
            problems.append(f"CodeUri {code_uri!r} is not a local path")
        else:
            cdir = (template_path.parent / code_uri).resolve()
            if not (cdir / "Cargo.toml").is_file():
                problems.append(f"CodeUri {code_uri}: no Cargo.toml there")
            else:
                data = tomllib.loads((cdir / "Cargo.toml").read_text(encoding="utf-8"))
                is_pkg = "package" in data
                if not binary:
                    if is_pkg:
                        binary = data["package"]["name"]
                    else:
                        problems.append(f"CodeUri {code_uri} is a workspace root: Metadata.BuildProperties.Binary is required")
                if binary:
                    crate = repo / "functions" / binary
                    if is_pkg and cdir != crate.resolve():
                        problems.append(f"CodeUri {code_uri} is not functions/{binary}/")
        if binary and crate is not None:
            if not (crate / "Cargo.toml").is_file():
                problems.append(f"functions/{binary}/Cargo.toml does not exist")
                crate_ok = False
            else:
                pkg, bins = crate_binaries(crate)
                if binary not in bins:
                    problems.append(f"functions/{binary}/Cargo.toml declares no binary {binary!r} (has: {sorted(bins) or 'none'})")
                if members and crate.resolve() not in members:
                    problems.append(f"functions/{binary} is not a member of the Cargo workspace")
                crate_ok = (crate / "src").is_dir()
                deployed.add(crate.resolve())
        else:
            crate_ok = False
        rep.check(fid, f"code: {code_uri} -> " + (f"functions/{binary}/ bin {binary}" if binary else "?"), problems)

        # ---- (b) environment
        problems = []
        env = dict(deep_get(globals_fn, "Environment", "Variables", default={}) or {})
        env.update(deep_get(props, "Environment", "Variables", default={}) or {})
        tpl_env = set(env) - {"RUST_LOG"}
        fn_srcs: list[RustSource] = []
        if not crate_ok:
            problems.append(f"cannot read functions/{binary or '?'}/src: crate missing")
        else:
            fn_srcs = [read_rust(p) for p in sorted((crate / "src").rglob("*.rs"))]
            code_env = {m for s in fn_srcs for lit in s.strings for m in re.findall(r"^(CAPBLOCK_[A-Z0-9_]+)$", lit)}
            missing = sorted(code_env - tpl_env)
            unused = sorted(tpl_env - code_env)
            if missing:
                problems.append("read by the code, missing in the template: " + ", ".join(missing))
            if unused:
                problems.append("set in the template, never read by the code: " + ", ".join(unused))
        rep.check(fid, f"env: {len(tpl_env)} variables", problems)

        # ---- (c) IAM actions
        problems = []
        stmts, notes = policy_statements(fid, fn, resources)
        allow = [s for s in stmts if s.get("Effect") == "Allow"]
        allowed: dict[str, tuple[str, dict]] = {}  # lower-case action -> (as written, statement)
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
        required: dict[str, str] = {}  # action -> why
        if not crate_ok:
            problems.append(f"cannot collect SDK calls: functions/{binary or '?'} missing")
        else:
            fn_code = "\n".join(s.code for s in fn_srcs)
            sources = [(f"functions/{binary}/src", fn_code, sdk_services(fn_code))]
            for m in used_modules(fn_code, modules):
                sources.append((str(m.path.relative_to(repo)), m.code, m.services))
            notes.append("adapters used: " + (", ".join(Path(w).name for w, _, _ in sources[1:]) or "none"))
            for where, code, services in sources:
                calls, probs = sdk_calls(code, services, sdk)
                problems += [f"{where}: {p}" for p in probs]
                for svc, ops in calls.items():
                    opnames = sdk.operations(svc) or {}
                    prefix = IAM_PREFIX.get(svc, svc)
                    checked_services.add(svc)
                    for op in sorted(ops):
                        required[f"{prefix}:{opnames.get(op, pascal(op))}"] = f"{op}() in {where}"
                    for op in sorted(ops):
                        for isvc, iop, rx, extra in IMPLIED:
                            if isvc == svc and iop == op and (rx is None or re.search(rx, code)):
                                for e in extra:
                                    required.setdefault(e, f"implied by {op}() in {where}")
            for action, why in sorted(required.items()):
                if not any(fnmatch.fnmatchcase(action.lower(), a) for a in allowed):
                    problems.append(f"not allowed: {action} (called: {why})")
            prefixes = {IAM_PREFIX.get(s, s) for s in checked_services}
            needs_passrole = any(a == "iam:PassRole" for a in required)
            for a, (written, s) in sorted(allowed.items()):
                pre = a.split(":", 1)[0]
                if a == "iam:passrole":
                    if not needs_passrole:
                        problems.append(f"allowed but never needed: {written} (statement {s.get('Sid', '?')})")
                    continue
                if pre in prefixes and not any(r.lower() == a for r in required):
                    problems.append(f"allowed but never called: {written} (statement {s.get('Sid', '?')})")
            if args.verbose:
                notes += [f"needs {a} <- {why}" for a, why in sorted(required.items())]
        rep.check(fid, f"iam: {len(required)} actions needed, {len(allowed)} allowed", problems, notes + sdk.notes)
        sdk.notes = []

        # ---- (d) Resource '*' scoping
        problems = []
        if action_data is None:
            notes = ["cfn-lint not importable: resource-level data unavailable, only EC2 Describe* accepted on '*'"]
        else:
            notes = []
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
        rep.check(fid, "scope: Resource '*' only where no resource-level permission exists", problems, notes)

    # ---- every function crate is deployed
    crates = sorted(p.parent.resolve() for p in (repo / "functions").glob("*/Cargo.toml"))
    orphans = [c.name for c in crates if c not in deployed]
    rep.lines.append("workspace:")
    rep.check("workspace", f"every functions/*/ crate is in the template ({len(crates)} crates)",
              [f"functions/{o}/ has no AWS::Serverless::Function" for o in orphans])

    print("\n".join(rep.lines))
    print(f"{rep.passed} passed, {rep.failed} failed")
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
