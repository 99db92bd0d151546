"""Cross-checks template.yaml against the Rust code it deploys.

For every AWS::Serverless::Function in the template:

  code   CodeUri / Metadata.BuildProperties.Binary point at functions/<binary>/, a
         workspace member whose Cargo.toml declares a binary of that name, built
         with BuildMethod rust-cargolambda.
  env    The CAPBLOCK_* string literals in functions/<binary>/src/ equal the
         function's Environment.Variables (Globals merged), RUST_LOG excepted.
  iam    The function's role allows exactly the IAM actions of the ports it declares
         (`pub const AWS_PORTS` in functions/<binary>/src), as the adapters declare
         them (`pub const ACTIONS` in shared/src/aws/<adapter>): nothing missing, nothing
         of ec2/dynamodb/sns/scheduler (or iam:PassRole) extra, no wildcard actions.
  scope  `Resource: '*'` only on actions that have no resource-level permission
         (per cfn-lint's IAM action data).

Before those, for every adapter: each SDK call in its deployed code has its action in
its ACTIONS table, and each declared action is called (or implied by a call). After:
every functions/<name>/ crate is deployed by some function; and every
AWS::Logs::MetricFilter (logs) filters on an `event` the code logs, with an alarm.
Prints the problems and ends with `N passed, M failed`; exits 1 if any check failed.
Needs PyYAML (and cfn-lint for the scope check): run it through infra/deploy/crosscheck.sh,
which uses the deploy venv. How to add a new AWS call: ARCHITECTURE.md, "Where a change goes".
"""

from __future__ import annotations

import argparse
import os
import tomllib
from pathlib import Path

from .cfn import deep_get, load_action_data, load_template
from .code import crate_binaries, env_read, workspace_members
from .iam import (
    CHECKED_SERVICES,
    allowed_actions,
    check_adapter,
    check_known,
    check_scope,
    compare,
    function_needs,
    load_adapters,
)
from .logs import check_log_alarms
from .report import Report, rel
from .rust import RustSource, read_rust
from .sdk import Sdk


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = Path(__file__).resolve().parent
    ap.add_argument("--repo", type=Path, default=here.parent.parent.parent,
                    help="repository root (default: this checkout)")
    ap.add_argument("--template", type=Path, help="template (default: <repo>/template.yaml)")
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    ap.add_argument("--registry", type=Path, default=cargo_home / "registry" / "src",
                    help="cargo registry sources, for the SDK operation lists (default: $CARGO_HOME/registry/src)")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every needed action and its port")
    args = ap.parse_args(argv)

    repo = args.repo.resolve()
    template_path = (args.template or repo / "template.yaml").resolve()
    tpl = load_template(template_path)
    resources: dict = tpl.get("Resources", {})
    globals_fn = deep_get(tpl, "Globals", "Function", default={}) or {}
    lock = tomllib.loads((repo / "Cargo.lock").read_text(encoding="utf-8")) if (repo / "Cargo.lock").is_file() else {}
    sdk = Sdk(args.registry, lock)
    adapters = load_adapters(repo / "shared" / "src" / "aws")
    members = workspace_members(repo)
    action_data = load_action_data()
    services = set(CHECKED_SERVICES)
    for a in adapters.values():
        services |= {x.split(":", 1)[0] for acts in (a.actions or {}).values() for x in acts if x != "iam:PassRole"}
    rep = Report()
    deployed: set[Path] = set()

    functions = {k: v for k, v in resources.items() if isinstance(v, dict) and v.get("Type") == "AWS::Serverless::Function"}
    print(f"crosscheck: {rel(template_path, repo)}: {len(functions)} functions, adapters: "
          + ", ".join(f"{a.name} ({len(a.actions or {})} ports)" for a in adapters.values()))

    rep.lines.append("adapters:")
    for a in adapters.values():
        others = {x for b in adapters.values() if b.name != a.name for acts in (b.actions or {}).values() for x in acts}
        problems, notes = check_adapter(a, sdk, others)
        declared = sorted({x for acts in (a.actions or {}).values() for x in acts})
        if args.verbose:
            notes += [f"{port}: {', '.join(acts) or 'no actions'}" for port, acts in sorted((a.actions or {}).items())]
        rep.check(a.name, f"{a.name}: every SDK call declared ({len(declared)} actions)", problems, notes)

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
                _pkg, bins = crate_binaries(crate)
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
            code_env = env_read(repo, fn_srcs)
            missing = sorted(code_env - tpl_env)
            unused = sorted(tpl_env - code_env)
            if missing:
                problems.append("read by the code, missing in the template: " + ", ".join(missing))
            if unused:
                problems.append("set in the template, never read by the code: " + ", ".join(unused))
        rep.check(fid, f"env: {len(tpl_env)} variables", problems)

        # ---- (c) IAM actions
        allowed, allow, problems, notes = allowed_actions(fid, fn, resources)
        required: dict[str, str] = {}
        if not crate_ok:
            problems.append(f"cannot read the ports of functions/{binary or '?'}: crate missing")
        else:
            needs = function_needs(crate / "src", adapters, sdk)
            required = needs.required
            problems += needs.problems
            notes += needs.notes
            problems += compare(required, allowed, services)
            if args.verbose:
                notes += [f"needs {act} <- {port}" for act, port in sorted(required.items())]
        rep.check(fid, f"iam: {len(required)} actions needed, {len(allowed)} allowed", problems, notes + sdk.notes)
        sdk.notes = []

        # ---- (d) Resource '*' scoping
        problems, notes = check_scope(allow, action_data)
        rep.check(fid, "scope: Resource '*' only where no resource-level permission exists", problems, notes)

        # ---- (e) every action known to IAM, on resource types it is authorized on
        declared = {x for a in adapters.values() for acts in (a.actions or {}).values() for x in acts}
        problems, notes = check_known(allow, action_data, declared)
        rep.check(fid, "known: every action and resource type is one IAM authorizes", problems, notes)

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
