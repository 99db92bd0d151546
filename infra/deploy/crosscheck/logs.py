"""Every log metric filter tests an `event` the code logs (see check_log_alarms)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from .cfn import as_list, deep_get, ref_target
from .report import Report, rel
from .rust import lex_rust

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


def check_log_alarms(tpl: dict, repo: Path, globals_fn: dict, rep: Report) -> None:
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
            # The library is two crates: core (the workflows, which log most events) and shared
            # (the adapters and the Lambda edge).
            srcs = [repo / "core" / "src", repo / "shared" / "src"] + ([fn_src] if fn_src else [])
            for ev in events:
                hits = [c for s in srcs for c in calls(s)
                        if re.search(r"\bevent\s*=\s*\"" + re.escape(ev) + "\"", c.text)]
                if not hits:
                    logged = {m for s in srcs for c in calls(s) for m in re.findall(r"\bevent\s*=\s*\"([^\"]+)\"", c.text)}
                    near = difflib.get_close_matches(ev, sorted(logged), n=3, cutoff=0.8)
                    problems.append(f"event {ev!r} is logged nowhere in core/src, shared/src or functions/*/src of {fn_id}"
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

