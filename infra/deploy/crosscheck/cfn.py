"""template.yaml as data: CloudFormation's short-form intrinsics, the policy statements that
apply to a function's role, and cfn-lint's IAM action data (which actions have resource-level
permissions)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml


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
        return yaml.load(fh, Loader=CfnLoader)


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
        import cfnlint

        p = Path(cfnlint.__file__).parent / "data" / "AdditionalSpecs" / "Policies.json"
        return json.loads(p.read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - optional dependency
        return None

