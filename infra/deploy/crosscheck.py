#!/usr/bin/env python3
"""Cross-checks template.yaml against the Rust code it deploys.

For every AWS::Serverless::Function in the template:

  code   CodeUri / Metadata.BuildProperties.Binary point at functions/<binary>/, a
         workspace member whose Cargo.toml declares a binary of that name, built
         with BuildMethod rust-cargolambda.
  env    The CAPBLOCK_* string literals in functions/<binary>/src/ equal the
         function's Environment.Variables (Globals merged), RUST_LOG excepted.
  iam    Every SDK operation the function can reach is allowed by the function's
         policy statements, and every allowed action of those services is actually
         called. No wildcard actions. Trait-level: the function needs the port
         traits (shared/src/ports.rs) in the bounds of the app services it uses
         (shared/src/app/) plus those its src names; it can reach the SDK calls of
         the `impl <Trait> for <Type>` blocks of those traits (and the module
         helpers they call) in the shared/src/aws/ adapter types its src names,
         plus its own SDK calls. See infra/deploy/README.md.
  scope  `Resource: '*'` only on actions that have no resource-level permission
         (per cfn-lint's IAM action data).

Also: every functions/<name>/ crate is deployed by some function in the template; and every
AWS::Logs::MetricFilter (logs) filters on an `event` that a tracing call in shared/src or in the
crate of the function writing that log group logs (at RUST_LOG's level or above), with every
other field it tests, under the JSON key init_logging puts fields at; each filter's metric has
an alarm.
Prints the problems per function and ends with `N passed, M failed`; exits 1 if
any check failed. Needs PyYAML (and cfn-lint for the scope check): run it through
infra/deploy/crosscheck.sh, which uses the deploy venv.
"""

from __future__ import annotations

import argparse
import difflib
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


# --------------------------------------------------------------------------- Rust items
#
# The IAM check is trait-level: one adapter type (Ec2Market, DynamoStore) implements several
# narrow port traits, and each function uses only some of them. So the adapters are cut into
# items - `impl <Trait> for <Type>` blocks, inherent `impl <Type>` blocks, free fns - and every
# trait impl gets the SDK calls its methods can reach. A brace matcher over the lexed code
# (comments gone, literals empty) is enough: no macro or string can unbalance it.


def match_brace(code: str, i: int) -> int:
    """Index of the `}` closing the `{` at code[i] (len(code) if it never closes)."""
    depth = 0
    for k in range(i, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(code)


def skip_angles(s: str, i: int) -> int:
    """Index just past the `<...>` (nested) starting at s[i]; i itself if s[i] is not `<`."""
    if i >= len(s) or s[i] != "<":
        return i
    depth = 0
    for k in range(i, len(s)):
        if s[k] == "<":
            depth += 1
        elif s[k] == ">" and s[k - 1] != "-":  # `->` inside Fn(..) -> T bounds
            depth -= 1
            if depth == 0:
                return k + 1
    return len(s)


# Item headers looked for at brace depth 0 (of a file, or of an impl/mod body).
ITEM_RX = re.compile(
    r"(?P<pub>pub(?:\s*\([^)]*\))?\s+)?(?:(?:const|async|unsafe|extern\s*\"\")\s+)*fn\s+(?P<fn>[A-Za-z_]\w*)"
    r"|(?:unsafe\s+)?impl\b(?P<impl>)"
    r"|(?:pub(?:\s*\([^)]*\))?\s+)?mod\s+(?P<mod>[A-Za-z_]\w*)\s*\{"
    r"|(?:pub(?:\s*\([^)]*\))?\s+)?(?:struct|enum|union|trait|type|const|static)\s+(?P<item>[A-Za-z_]\w*)"
)


def top_items(code: str):
    """(kind, name_or_header, text, is_pub) for the items at brace depth 0 of `code`.

    kind "fn": text is the whole fn; "impl": name is the header, text the body between the
    braces; "mod" (inline): text is the body; "item" (struct, enum, trait, type, const, static):
    text is the whole item. Fns without a body (trait method declarations) and `mod x;` are skipped.
    """
    i, n, depth = 0, len(code), 0
    while i < n:
        c = code[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif depth == 0 and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] in "_'")):
            m = ITEM_RX.match(code, i)
            if m:
                j = m.end() - 1 if m.group("mod") else m.end()
                while j < n and code[j] not in "{;":
                    j += 1
                if j >= n or code[j] == ";":
                    if m.group("item"):
                        yield "item", m.group("item"), code[m.start():j + 1], False
                    i = j + 1
                    continue
                end = match_brace(code, j)
                header = code[m.start():j]
                body = code[j + 1:end]
                if m.group("fn"):
                    yield "fn", m.group("fn"), header + "{" + body + "}", bool(m.group("pub"))
                elif m.group("mod"):
                    yield "mod", m.group("mod"), body, False
                elif m.group("item"):
                    yield "item", m.group("item"), header + "{" + body + "}", False
                else:
                    yield "impl", header, body, False
                i = end + 1
                continue
        i += 1


def last_segment(path: str) -> str:
    """`crate::ports::Ledger<'a>` -> `Ledger`; `&'a mut Foo<T>` -> `Foo`."""
    path = re.sub(r"<.*", "", path.strip()).strip()
    path = re.sub(r"^(?:&\s*(?:'\w+\s*)?(?:mut\s+)?|dyn\s+|!)+", "", path)
    return path.split("::")[-1].strip()


def parse_impl_header(header: str) -> tuple[str | None, str]:
    """`impl<M> crate::ports::Foo for Bar<M> where ...` -> ("Foo", "Bar"); inherent -> (None, "Bar")."""
    h = re.sub(r"^(?:unsafe\s+)?impl\s*", "", header.strip())
    h = h[skip_angles(h, 0):]  # the impl's own generic parameters
    h = re.split(r"\bwhere\b", h, maxsplit=1)[0]
    # `for` outside angle brackets separates the trait from the type
    depth, parts, start = 0, [], 0
    for k, ch in enumerate(h):
        if ch == "<":
            depth += 1
        elif ch == ">" and h[k - 1] != "-":
            depth -= 1
        elif depth == 0 and h.startswith("for", k) and (k == 0 or not h[k - 1].isalnum()) \
                and (k + 3 == len(h) or not (h[k + 3].isalnum() or h[k + 3] == "_")):
            parts.append(h[start:k])
            start = k + 3
    parts.append(h[start:])
    if len(parts) >= 2:
        return last_segment(parts[0]), last_segment(parts[-1])
    return None, last_segment(parts[0])


@dataclass
class RustFn:
    """A fn of an adapter module: a trait-impl method, an inherent method or a free fn."""

    name: str
    code: str  # header and body
    path: Path
    owner: str | None  # the Self type, for methods
    trait: str | None  # the implemented trait, for trait-impl methods
    public: bool

    @property
    def label(self) -> str:
        if self.trait:
            return f"<{self.owner} as {self.trait}>::{self.name}"
        return f"{self.owner}::{self.name}" if self.owner else f"{self.name}"


def rust_fns(code: str, path: Path) -> list[RustFn]:
    fns: list[RustFn] = []
    for kind, name, body, public in top_items(code):
        if kind == "fn":
            fns.append(RustFn(name, body, path, None, None, public))
        elif kind == "mod":
            fns += rust_fns(body, path)
        else:
            trait, owner = parse_impl_header(name)
            for k2, fname, fbody, fpub in top_items(body):
                if k2 == "fn":
                    # trait methods are as public as the trait
                    fns.append(RustFn(fname, fbody, path, owner, trait, fpub or trait is not None))
    return fns


# --------------------------------------------------------------------------- adapter modules

# Extra IAM actions an operation needs, depending on what the code passes to it, looked for in
# the code a trait method can reach (so a Put in one trait's transaction does not make another
# trait's transaction need PutItem).
#   (service, operation, regex over the reachable code or None, implied actions)
IMPLIED = [
    # TransactWriteItems is authorized per item: each kind of item needs its own action.
    ("dynamodb", "transact_write_items", r"\bConditionCheck::builder\b|\.\s*condition_check\s*\(", ["dynamodb:ConditionCheckItem"]),
    ("dynamodb", "transact_write_items", r"\bPut::builder\b", ["dynamodb:PutItem"]),
    ("dynamodb", "transact_write_items", r"\bUpdate::builder\b", ["dynamodb:UpdateItem"]),
    ("dynamodb", "transact_write_items", r"\bDelete::builder\b", ["dynamodb:DeleteItem"]),
    # Tags in the purchase request are applied with CreateTags (ec2:CreateAction condition).
    ("ec2", "purchase_capacity_block", r"\bTagSpecification\b", ["ec2:CreateTags"]),
    # A schedule whose target carries a role ARN makes the caller pass that role.
    ("scheduler", "create_schedule", r"\.\s*role_arn\s*\(", ["iam:PassRole"]),
    ("scheduler", "update_schedule", r"\.\s*role_arn\s*\(", ["iam:PassRole"]),
]

METHOD_CALL_RX = re.compile(r"\.\s*([a-z_][a-z0-9_]*)\s*(?:::\s*<[^>]*>\s*)?\(")


def sdk_services(code: str) -> set[str]:
    return set(re.findall(r"\baws_sdk_(\w+?)::", code))


def sdk_calls(code: str, services: set[str], sdk: Sdk) -> tuple[dict[str, set[str]], list[str]]:
    """service -> called operations (snake_case); problems."""
    calls: dict[str, set[str]] = {}
    problems: list[str] = []
    methods = set(METHOD_CALL_RX.findall(code))
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


def action_of(svc: str, op: str, sdk: Sdk) -> str:
    return f"{IAM_PREFIX.get(svc, svc)}:{(sdk.operations(svc) or {}).get(op, pascal(op))}"


@dataclass
class Module:
    """shared/src/aws/<name>.rs plus its child modules (shared/src/aws/<name>/**.rs): a child
    module exists to reach its parent's private helpers, so the two are one unit here."""

    name: str
    paths: list[Path]
    code: str
    types: set[str]  # pub structs/enums: what a function names when it constructs the adapter
    services: set[str]
    fns: list[RustFn]

    def impls(self) -> dict[tuple[str, str], list[RustFn]]:
        out: dict[tuple[str, str], list[RustFn]] = {}
        for f in self.fns:
            if f.trait:
                out.setdefault((f.trait, f.owner), []).append(f)
        return out

    def callees(self, f: RustFn) -> list[RustFn]:
        """The fns of this module that `f` calls: `self.x(` / `Self::x(` / `Type::x(` methods of
        the same type (inherent or any trait's), and bare or `super::` calls of free fns."""
        code = f.code
        methods = set(re.findall(r"\b(?:self\s*\.|Self\s*::)\s*([a-z_]\w*)\s*(?:::\s*<[^>]*>\s*)?\(", code))
        typed = set(re.findall(r"\b([A-Z]\w*)\s*::\s*([a-z_]\w*)\s*(?:::\s*<[^>]*>\s*)?\(", code))
        bare = set(re.findall(r"(?<![\w.:])(?:super\s*::\s*)*([a-z_]\w*)\s*(?:::\s*<[^>]*>\s*)?\(", code))
        out = []
        for g in self.fns:
            if g is f:
                continue
            if g.owner is None:
                hit = g.name in bare
            else:
                hit = (g.name in methods and (f.owner is None or g.owner == f.owner)) or (g.owner, g.name) in typed
            if hit:
                out.append(g)
        return out

    def reach(self, start: RustFn) -> list[tuple[RustFn, list[str]]]:
        """Every fn `start` can reach through this module's helpers, with the call chain.

        Transitive, not one level: record_bought -> close_intent -> transact is two helpers
        deep before TransactWriteItems, and both are the trait method's doing."""
        seen = {id(start): [start.name]}
        order = [start]
        for f in order:
            for g in self.callees(f):
                if id(g) not in seen:
                    seen[id(g)] = seen[id(f)] + [g.name]
                    order.append(g)
        return [(f, seen[id(f)]) for f in order]

    def actions_from(self, start: RustFn, sdk: Sdk, repo: Path) -> tuple[dict[str, str], list[str]]:
        """IAM action -> why, for everything `start` can reach; problems."""
        out: dict[str, str] = {}
        problems: list[str] = []
        reached = self.reach(start)
        reach_code = "\n".join(f.code for f, _ in reached)
        for f, chain in reached:
            calls, probs = sdk_calls(f.code, self.services, sdk)
            problems += [f"{rel(f.path, repo)}: {p}" for p in probs]
            where = f"{rel(f.path, repo)} {start.label}" + (f" -> {' -> '.join(chain[1:])}" if len(chain) > 1 else "")
            for svc, ops in calls.items():
                for op in sorted(ops):
                    out.setdefault(action_of(svc, op, sdk), f"{op}() in {where}")
                    for isvc, iop, rx, extra in IMPLIED:
                        if isvc == svc and iop == op and (rx is None or re.search(rx, reach_code)):
                            for e in extra:
                                out.setdefault(e, f"implied by {op}() in {where}")
        return out, sorted(set(problems))


def rel(p: Path, repo: Path) -> str:
    return str(p.relative_to(repo)) if p.is_relative_to(repo) else str(p)


def load_modules(aws_dir: Path) -> dict[str, Module]:
    mods: dict[str, Module] = {}
    # An adapter is <name>.rs (with children under <name>/) or <name>/mod.rs (with siblings).
    heads = sorted(aws_dir.glob("*.rs")) + sorted(aws_dir.glob("*/mod.rs")) if aws_dir.is_dir() else []
    for p in heads:
        if p.name == "mod.rs":
            p = p.parent / "mod.rs"
            paths = [p] + sorted(q for q in p.parent.rglob("*.rs") if q != p)
            stem = p.parent.name
        else:
            paths = [p] + sorted((aws_dir / p.stem).rglob("*.rs"))
            stem = p.stem
        if stem == "mod":
            continue
        fns: list[RustFn] = []
        codes = []
        for q in paths:
            # #[cfg(test)] items are not deployed; create_table is the local-dev table helper
            code = strip_fn(strip_tests(read_rust(q).code), "create_table")
            codes.append(code)
            fns += rust_fns(code, q)
        code = "\n".join(codes)
        types = set(re.findall(r"\bpub\s+(?:struct|enum)\s+([A-Z]\w*)", code))
        mods[stem] = Module(stem, paths, code, types, sdk_services(code), fns)
    return mods


# --------------------------------------------------------------------------- app services and ports
#
# The traits a function needs are the bounds of the generic application services it runs
# (`Scanner<M, S, N>` where `M: OfferingSource + Purchaser + ...`). Resolved per item, not per
# module: app/extend.rs imports only the plain fn `charges_for` from app/purchase.rs, and taking
# all of purchase.rs would give track-blocks `Buyer`'s `Purchaser` bound - PurchaseCapacityBlock
# in a function that never buys.


def ports_traits(ports: Path) -> set[str]:
    """The port traits: every `pub trait` of shared/src/ports.rs."""
    if not ports.is_file():
        return set()
    return set(re.findall(r"\bpub\s+trait\s+([A-Z]\w*)", strip_tests(read_rust(ports).code)))


def trait_bounds(code: str) -> set[str]:
    """Trait names in generic bounds and where clauses (`M: A + B + ?Sized`), `dyn T` and `impl T`."""
    out: set[str] = set()
    bound = re.compile(r"\s*\??\s*(?:for\s*<[^>]*>\s*)?(?:[A-Za-z_]\w*\s*::\s*)*([A-Za-z_]\w*|'\w+)")
    for m in re.finditer(r"(?<![\w:'])[A-Z]\w*\s*:(?!:)", code):  # `M:` but not `Foo::`
        j = m.end()
        while (t := bound.match(code, j)):
            out.add(t.group(1))
            j = skip_angles(code, t.end())
            plus = re.compile(r"\s*\+").match(code, j)
            if not plus:
                break
            j = plus.end()
    out |= set(re.findall(r"\b(?:dyn|impl)\s+(?:[A-Za-z_]\w*\s*::\s*)*([A-Z]\w*)", code))
    return out


def split_top(s: str, sep: str = ",") -> list[str]:
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(s):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == sep and depth == 0:
            parts.append(s[start:k])
            start = k + 1
    parts.append(s[start:])
    return [p for p in parts if p]


def use_paths(tree: str) -> list[tuple[list[str], str]]:
    """`a::{b, c::{d as e}}` -> [(["a","b"], "b"), (["a","c","d"], "e")]: (path, local name)."""
    out = []
    for part in split_top(re.sub(r"\s+", " ", tree).replace(" ::", "::").replace(":: ", "::").strip()):
        part = part.strip()
        if "{" in part:
            k = part.index("{")
            head = [x for x in part[:k].split("::") if x]
            for sub, local in use_paths(part[k + 1:part.rindex("}")]):
                path = head + ([] if sub == ["self"] else sub)
                out.append((path, path[-1] if sub == ["self"] else local))
        else:
            name, _, alias = part.partition(" as ")
            path = [x.strip() for x in name.split("::") if x.strip()]
            if path and path[-1] == "self":
                path = path[:-1]
            if path:
                out.append((path, alias.strip() or path[-1]))
    return out


@dataclass
class AppModule:
    name: str
    code: str
    items: dict[str, str]  # item -> its code: the fn, or the type with all its impl blocks
    imports: dict[str, tuple[str, str | None]]  # local name -> (app module, item or None for the module)


def app_refs(code: str, roots: list[str], modules: set[str]) -> dict[str, tuple[str, str | None]]:
    """Local names a piece of code imports from app modules, given how it spells the app module
    root (`super`, `crate::app`, `capblock_shared::app`)."""
    refs: dict[str, tuple[str, str | None]] = {}
    root_lists = [r.split("::") for r in roots]
    for tree in re.findall(r"\buse\s+([^;]+);", code):
        for path, local in use_paths(tree):
            for root in root_lists:
                if path[:len(root)] == root and len(path) > len(root) and path[len(root)] in modules:
                    m = path[len(root)]
                    rest = path[len(root) + 1:]
                    refs[local] = (m, rest[0] if rest and rest[0] != "*" else None)
                elif path == root[:-1] + [root[-1]] and root[-1] == "app":
                    refs[local] = ("", None)  # `use <crate>::app;`: the app root itself
    return refs


def load_app(app_dir: Path, crate: str) -> dict[str, AppModule]:
    files = {p.stem: p for p in app_dir.glob("*.rs") if p.stem != "mod"} if app_dir.is_dir() else {}
    files |= {d.name: d / "mod.rs" for d in app_dir.iterdir() if (d / "mod.rs").is_file()} if app_dir.is_dir() else {}
    out: dict[str, AppModule] = {}
    for name, path in files.items():
        code = strip_tests(read_rust(path).code)
        items: dict[str, str] = {}
        impls: list[tuple[str, str]] = []
        for kind, n, text, _ in top_items(code):
            if kind in ("fn", "item"):
                items[n] = items.get(n, "") + "\n" + text
            elif kind == "impl":
                impls.append((parse_impl_header(n)[1], n + "{" + text + "}"))
        for owner, text in impls:
            items[owner] = items.get(owner, "") + "\n" + text
        imports = app_refs(code, ["super", "crate::app"], set(files))
        out[name] = AppModule(name, code, items, imports)
    return out


def needed_traits(fn_code: str, repo: Path, ports: set[str], crate: str) -> dict[str, str]:
    """Port trait -> why a function needs it: the bounds of the app items it uses (followed
    through the items they use, across app modules), plus the port traits its own code names
    (it may call an adapter through one directly, e.g. `store.put_rule(..)` with RuleStore)."""
    app = load_app(repo / "shared" / "src" / "app", crate)
    out: dict[str, str] = {}
    seen: set[tuple[str, str]] = set()

    def items_named(code: str, refs: dict[str, tuple[str, str | None]], local: AppModule | None):
        """(module, item) pairs a piece of code refers to."""
        found = []
        idents = set(re.findall(r"\b[A-Za-z_]\w*\b", code))
        for ident in idents:
            if ident in refs:
                m, item = refs[ident]
                if m == "":  # `app::m::X` through an imported app root
                    found += [(m2, x) for m2, x in re.findall(rf"\b{ident}\s*::\s*(\w+)\s*::\s*(\w+)", code) if m2 in app]
                elif item is None:  # a module import: `m::X`
                    found += [(m, x) for x in re.findall(rf"\b{ident}\s*::\s*(\w+)", code)] or [(m, "*")]
                else:
                    found.append((m, item))
            if local and ident in local.items:
                found.append((local.name, ident))
        # fully spelled paths, without a use
        for root in (rf"\b{crate}\s*::\s*app", r"\bcrate\s*::\s*app", r"\bsuper"):
            found += [(m, x) for m, x in re.findall(rf"{root}\s*::\s*(\w+)\s*::\s*(\w+)", code) if m in app]
        return found

    fn_refs = app_refs(fn_code, [f"{crate}::app"], set(app))
    frontier = [(m, x, "used by the function") for m, x in items_named(fn_code, fn_refs, None)]
    while frontier:
        m, item, why = frontier.pop()
        if (m, item) in seen or m not in app:
            continue
        seen.add((m, item))
        mod = app[m]
        # unknown item (a glob import, a re-export): take the whole module, erring on the safe side
        code = mod.items.get(item) if item in mod.items else mod.code
        label = f"app/{m}.rs {item if item in mod.items else '(whole module)'}"
        for t in sorted(trait_bounds(code) & ports):
            out.setdefault(t, f"bound in {label} ({why})")
        for m2, x in items_named(code, mod.imports, mod):
            frontier.append((m2, x, f"via {label}"))
    for t in sorted(ports):
        if re.search(rf"\b{t}\b", fn_code):
            out.setdefault(t, "named by the function")
    return out


def crate_ident(repo: Path) -> str:
    p = repo / "shared" / "Cargo.toml"
    if p.is_file():
        name = deep_get(tomllib.loads(p.read_text(encoding="utf-8")), "package", "name")
        if name:
            return name.replace("-", "_")
    return "capblock_shared"


# --------------------------------------------------------------------------- template model


def config_readers(repo: Path) -> dict[str, set[str]]:
    """The CAPBLOCK_* variables each public reader in shared/src/config.rs reads, by name."""
    # Literals are blanked in a lexed RustSource's code; read them from the text, fn by fn.
    text = (repo / "shared" / "src" / "config.rs").read_text()
    text = text.split("#[cfg(test)]")[0]
    out: dict[str, set[str]] = {}
    for m in re.finditer(r"pub fn (\w+)", text):
        start = m.end()
        nxt = re.search(r"\n(pub fn |/// )", text[start:])
        body = text[start : start + nxt.start()] if nxt else text[start:]
        out[m.group(1)] = set(re.findall(r'"(CAPBLOCK_[A-Z0-9_]+)"', body))
    return {k: v for k, v in out.items() if v}


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


# --------------------------------------------------------------------------- log alarms
#
# The functions log JSON lines (tracing-subscriber's json format, shared/src/lambda.rs
# init_logging): {"timestamp":..,"level":"ERROR","fields":{"message":..,"event":"duplicate_purchase",..}}.
# A metric filter that tests `$.fields.event = "duplcate_purchase"` matches nothing, forever, and
# its alarm never fires: each filter is checked against the tracing calls that log its event.

LEVELS = ["trace", "debug", "info", "warn", "error"]
TRACING_CALL_RX = re.compile(r"\b(?:tracing::)?(trace|debug|info|warn|error)!\s*\(")


@dataclass
class LogCall:
    path: Path
    line: int
    level: str
    text: str  # the macro's arguments, as written


def tracing_calls(text: str, path: Path) -> list[LogCall]:
    """Every `tracing::<level>!(...)` / `<level>!(...)` call in a Rust source, raw text of its
    arguments included (string literals skipped when matching the parentheses)."""
    out = []
    for m in TRACING_CALL_RX.finditer(text):
        i, depth, n = m.end(), 1, len(text)
        while i < n and depth:
            c = text[i]
            if c == '"':
                i += 1
                while i < n and text[i] != '"':
                    i += 2 if text[i] == "\\" else 1
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            i += 1
        out.append(LogCall(path, text.count("\n", 0, m.start()) + 1, m.group(1), text[m.end():i - 1]))
    return out


def fields_key(repo: Path) -> str:
    """Where the JSON log lines put the event's fields: under "fields" (tracing-subscriber's
    default), or at the top level when init_logging flattens them."""
    src = repo / "shared" / "src"
    for p in src.rglob("*.rs") if src.is_dir() else []:
        if re.search(r"\.flatten_event\s*\(\s*true\s*\)", lex_rust(p.read_text(encoding="utf-8")).code):
            return "$."
    return "$.fields."


def level_of(rust_log) -> str:
    """The default level of a RUST_LOG value (`info`, `warn,capblock=debug`); info if unset."""
    for part in str(rust_log or "info").split(","):
        if "=" not in part and part.strip().lower() in LEVELS:
            return part.strip().lower()
    return "info"


def check_log_alarms(tpl: dict, repo: Path, globals_fn: dict, rep: "Report") -> None:
    resources: dict = tpl.get("Resources", {}) or {}
    filters = {k: v for k, v in resources.items() if isinstance(v, dict) and v.get("Type") == "AWS::Logs::MetricFilter"}
    alarms = [v.get("Properties", {}) or {} for v in resources.values()
              if isinstance(v, dict) and v.get("Type") == "AWS::CloudWatch::Alarm"]
    # log group -> (function id, its crate's src dir, its RUST_LOG level)
    writers: dict[str, tuple[str, Path | None, str]] = {}
    for fid, fn in resources.items():
        if not isinstance(fn, dict) or fn.get("Type") != "AWS::Serverless::Function":
            continue
        props = fn.get("Properties", {}) or {}
        group = ref_target(deep_get(props, "LoggingConfig", "LogGroup"))
        binary = deep_get(fn, "Metadata", "BuildProperties", "Binary")
        env = dict(deep_get(globals_fn, "Environment", "Variables", default={}) or {})
        env.update(deep_get(props, "Environment", "Variables", default={}) or {})
        if group:
            writers[group] = (fid, repo / "functions" / binary / "src" if binary else None, level_of(env.get("RUST_LOG")))
    key = fields_key(repo)
    calls_of: dict[Path, list[LogCall]] = {}

    def calls(src: Path) -> list[LogCall]:
        if src not in calls_of:
            calls_of[src] = [c for p in sorted(src.rglob("*.rs")) if src.is_dir()
                             for c in tracing_calls(p.read_text(encoding="utf-8"), p)]
        return calls_of[src]

    rep.lines.append("logs:")
    for fid, f in sorted(filters.items()):
        props = f.get("Properties", {}) or {}
        pattern = props.get("FilterPattern")
        problems: list[str] = []
        group = ref_target(props.get("LogGroupName"))
        events: list[str] = []
        if not isinstance(pattern, str):
            problems.append(f"FilterPattern {pattern!r} is not a literal")
            pattern = ""
        else:
            paths = re.findall(r"\$\.[A-Za-z_][\w.]*", pattern)
            wrong = sorted({p for p in paths if (p.startswith("$.fields.") != (key == "$.fields."))})
            if wrong:
                problems.append(f"{', '.join(wrong)}: the log lines carry their fields under {key}* "
                                "(shared/src/lambda.rs init_logging)")
            events = re.findall(re.escape(key) + r"event\s*=\s*\"([^\"]*)\"", pattern)
            fields = sorted({p[len(key):] for p in paths if p.startswith(key) and p not in wrong} - {"event"})
            if not events:
                problems.append(f"{pattern}: tests no {key}event = \"...\"")
        where = ""
        if group not in writers:
            problems.append(f"log group {group!r} is not the LoggingConfig.LogGroup of any function")
        else:
            fn_id, fn_src, level = writers[group]
            srcs = [repo / "shared" / "src"] + ([fn_src] if fn_src else [])
            for ev in events:
                hits = [c for s in srcs for c in calls(s)
                        if re.search(r"\bevent\s*=\s*\"" + re.escape(ev) + "\"", c.text)]
                if not hits:
                    logged = {m for s in srcs for c in calls(s) for m in re.findall(r"\bevent\s*=\s*\"([^\"]+)\"", c.text)}
                    near = difflib.get_close_matches(ev, sorted(logged), n=3, cutoff=0.8)
                    problems.append(f"event {ev!r} is logged nowhere in shared/src or functions/*/src of {fn_id}"
                                    + (f" (did you mean {', '.join(near)}?)" if near else ""))
                    continue
                loud = [c for c in hits if LEVELS.index(c.level) >= LEVELS.index(level)]
                if not loud:
                    problems.append(f"event {ev!r} is logged only below RUST_LOG={level} of {fn_id}")
                    continue
                for fld in fields:
                    if not any(re.search(r"(?<![\w.])" + re.escape(fld.split(".")[0]) + r"\b", c.text) for c in loud):
                        problems.append(f"field {fld!r} is not in the tracing call that logs {ev!r}")
                where = ", ".join(f"{rel(c.path, repo)}:{c.line}" for c in loud)
        metric = [(deep_get(t, "MetricNamespace"), deep_get(t, "MetricName")) for t in as_list(props.get("MetricTransformations"))]
        for ns, name in metric:
            if not any(a.get("Namespace") == ns and a.get("MetricName") == name for a in alarms):
                problems.append(f"metric {name} has no AWS::CloudWatch::Alarm")
        rep.check("logs", f"{fid}: {', '.join(events) or '?'}" + (f" <- {where}" if where else ""), problems)


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
    ports = ports_traits(repo / "shared" / "src" / "ports.rs")
    crate_name = crate_ident(repo)
    print(f"crosscheck: {rel(template_path, repo)}: {len(functions)} functions, {len(ports)} port traits; adapters: " +
          "; ".join(f"{m.name}.rs ({', '.join(sorted(f'{o} as {t}' for t, o in m.impls() if t in ports))})"
                    for m in modules.values() if any(t in ports for t, _ in m.impls())))
    # SDK calls that no trait impl and no public fn can reach are attributed to nobody: say so,
    # rather than let a new call go unchecked.
    for m in modules.values():
        reached = {id(g) for f in m.fns if f.trait or f.public for g, _ in m.reach(f)}
        for f in m.fns:
            if id(f) not in reached:
                calls, _ = sdk_calls(f.code, m.services, sdk)
                ops = sorted(op for v in calls.values() for op in v)
                if ops:
                    print(f"  note: {rel(f.path, repo)}: {f.label} calls {', '.join(ops)} but no trait impl reaches it")
    if args.verbose:
        for m in modules.values():
            for (t, o), methods in sorted(m.impls().items()):
                acts: set[str] = set()
                for f in methods:
                    acts |= set(m.actions_from(f, sdk, repo)[0])
                print(f"  {o} as {t} ({m.name}.rs): {', '.join(sorted(acts)) or 'no AWS calls'}")

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
            # Settings several functions share are read by one reader in shared/src/config.rs:
            # a function reads the variables of each reader it calls.
            for reader, names in config_readers(repo).items():
                if any(re.search(rf"\bconfig::{reader}\(", s.code) for s in fn_srcs):
                    code_env |= names
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
            # Test code is not deployed: it neither needs permissions nor constructs adapters.
            fn_code = "\n".join(strip_tests(s.code) for s in fn_srcs)
            where = f"functions/{binary}/src"
            # 1. SDK calls the function makes itself.
            calls, probs = sdk_calls(fn_code, sdk_services(fn_code), sdk)
            problems += [f"{where}: {p}" for p in probs]
            for svc, ops in calls.items():
                checked_services.add(svc)
                for op in sorted(ops):
                    required.setdefault(action_of(svc, op, sdk), f"{op}() in {where}")
            # 2. The port traits it needs (app service bounds + traits it names) ...
            traits = needed_traits(fn_code, repo, ports, crate_name)
            # 3. ... times the adapters it constructs: the impls of those traits for those types.
            used_impls: list[str] = []
            for m in modules.values():
                types = {t for t in m.types if re.search(rf"\b{t}\b", fn_code)}
                if not types:
                    continue
                for (trait, owner), methods in sorted(m.impls().items()):
                    if owner not in types or trait not in traits:
                        continue
                    used_impls.append(f"{owner}: {trait}")
                    for f in methods:
                        acts, probs = m.actions_from(f, sdk, repo)
                        problems += probs
                        for a, why in acts.items():
                            required.setdefault(a, why)
                # Public inherent methods / free fns of the adapter that the function calls itself
                # (e.g. a helper returning the client) count too.
                for f in m.fns:
                    if f.trait is None and f.public and f.name not in {"new", "default"} \
                            and re.search(rf"(?:\.|::)\s*{f.name}\s*(?:::\s*<[^>]*>\s*)?\(", fn_code):
                        acts, probs = m.actions_from(f, sdk, repo)
                        problems += probs
                        for a, why in acts.items():
                            required.setdefault(a, f"{why} (called by {where})")
            notes.append("port traits: " + (", ".join(sorted(traits)) or "none"))
            notes.append("adapter impls used: " + (", ".join(used_impls) or "none"))
            unimplemented = sorted(t for t in traits if not any(u.endswith(f": {t}") for u in used_impls))
            if unimplemented:
                notes.append("traits with no AWS adapter constructed here: " + ", ".join(unimplemented))
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
                notes += [f"needs trait {t} <- {why}" for t, why in sorted(traits.items())]
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

    # ---- every log metric filter matches what the code logs
    check_log_alarms(tpl, repo, globals_fn, rep)

    print("\n".join(rep.lines))
    print(f"{rep.passed} passed, {rep.failed} failed")
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
