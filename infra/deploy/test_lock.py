#!/usr/bin/env python3
"""The AWS SDK is built without its legacy HTTP stack (issue 15, item 10).

Run: infra/deploy/unit.sh, or python3 infra/deploy/test_lock.py

The aws-sdk-* crates' default `rustls` feature builds hyper 0.14 + h2 0.3 + rustls 0.21 +
rustls-webpki 0.101, which cargo-audit reports (h2 0.3.27, rustls-webpki 0.101.7). The workspace
declares every SDK crate with `default-features = false` and the current client only
(`default-https-client`: hyper 1, rustls 0.23). This checks, offline and in a second, that
Cargo.lock holds none of the legacy stack, and that no Cargo.toml of the workspace asks for the
SDK's defaults again. `make audit ADVISORY_DB=...` runs cargo-audit itself.
"""

from __future__ import annotations

import sys
import tomllib
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
REPO = Path(__file__).resolve().parent.parent.parent

# crate -> versions (a prefix of the version string) that belong to the legacy HTTP stack
LEGACY = {
    "h2": "0.3.",
    "hyper": "0.14.",
    "hyper-rustls": "0.24.",
    "rustls": "0.21.",
    "rustls-webpki": "0.101.",
    "tokio-rustls": "0.24.",
    "sct": "0.7.",
}
# SDK crates whose `default` (or a feature) brings the legacy stack in
LEGACY_FEATURES = {"rustls", "legacy-https-client", "legacy-client", "client-hyper"}


def sdk_crate(name: str) -> bool:
    return name == "aws-config" or name.startswith("aws-sdk-")


class Lock(unittest.TestCase):
    def test_no_legacy_http_stack_in_the_lock_file(self):
        lock = tomllib.loads((REPO / "Cargo.lock").read_text(encoding="utf-8"))
        found = sorted(f"{p['name']} {p['version']}" for p in lock["package"]
                       if p["version"].startswith(LEGACY.get(p["name"], "\0")))
        self.assertEqual(found, [], "the SDK's legacy HTTP stack is back in Cargo.lock: "
                                    "`cargo tree -i <crate>@<version>` shows who pulls it in")

    def test_sdk_crates_are_declared_without_their_default_features(self):
        root = tomllib.loads((REPO / "Cargo.toml").read_text(encoding="utf-8"))
        ws = root["workspace"]["dependencies"]
        sdk = {k: v for k, v in ws.items() if sdk_crate(k)}
        self.assertGreaterEqual(set(sdk), {"aws-config", "aws-sdk-ec2", "aws-sdk-dynamodb", "aws-sdk-sns",
                                           "aws-sdk-scheduler"})
        for name, spec in sdk.items():
            self.assertIsInstance(spec, dict, name)
            self.assertIs(spec.get("default-features"), False, f"{name}: default-features = false")
            feats = set(spec.get("features", []))
            self.assertIn("default-https-client", feats, name)
            self.assertFalse(feats & LEGACY_FEATURES, f"{name}: {sorted(feats & LEGACY_FEATURES)}")
        # Members take the SDK from the workspace (or at least without its defaults).
        for toml in sorted(REPO.glob("**/Cargo.toml")):
            if "target" in toml.parts or toml.parent == REPO:
                continue
            data = tomllib.loads(toml.read_text(encoding="utf-8"))
            for table in ("dependencies", "dev-dependencies", "build-dependencies"):
                for name, spec in (data.get(table) or {}).items():
                    if not sdk_crate(name):
                        continue
                    where = f"{toml.relative_to(REPO)} [{table}] {name}"
                    if isinstance(spec, dict) and spec.get("workspace"):
                        self.assertIn(name, ws, where)
                        self.assertFalse(set(spec.get("features", [])) & LEGACY_FEATURES, where)
                    else:
                        self.assertIsInstance(spec, dict, f"{where}: take it from the workspace")
                        self.assertIs(spec.get("default-features"), False, f"{where}: default-features = false")


if __name__ == "__main__":
    unittest.main(verbosity=2)
