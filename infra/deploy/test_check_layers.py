#!/usr/bin/env python3
"""check_layers.py finds what it is for: a module cycle, a layer importing upward, the simulator
using capblock's code; and passes a tree that keeps the rules."""

import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_layers


def tree(files: dict[str, str]) -> Path:
    root = Path(tempfile.mkdtemp())
    base = {
        "core/src/app/scan.rs": "use super::outbox::flush;\nuse crate::domain::rule::Rule;\n",
        "core/src/app/outbox.rs": "use crate::ports::Notifier;\n",
        "core/src/domain/rule.rs": "use super::money::Money;\n",
        "core/src/domain/money.rs": "",
        "core/src/ports/mod.rs": "mod store;\n",
        "core/src/ports/store.rs": "use crate::domain::rule::Rule;\n",
        "cli/src/main.rs": "mod scan;\n",
        "cli/src/scan.rs": "use crate::context::Ctx;\n",
        "cli/src/context.rs": "",
        "infra/market-sim/src/lib.rs": "",
        "infra/market-sim/src/market.rs": "use crate::scenario::Scenario;\n",
        "infra/market-sim/src/scenario.rs": "",
        "core/Cargo.toml": '[package]\nname = "capblock-core"\n\n[dependencies]\nserde.workspace = true\n',
        "shared/Cargo.toml": "[dependencies]\ncapblock-core.workspace = true\n",
        "functions/scan-offerings/Cargo.toml": "[dependencies]\ncapblock-shared.workspace = true\n",
        "functions/track-blocks/Cargo.toml": "[dependencies]\ncapblock-shared.workspace = true\n",
        "infra/market-sim/Cargo.toml": "[dependencies]\ncapblock-http1.workspace = true\n[dev-dependencies]\ntempfile = \"3\"\n",
    }
    base.update(files)
    for rel, text in base.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def problems(files: dict[str, str]) -> int:
    return check_layers.main(["check_layers.py", str(tree(files))])


class CheckLayers(unittest.TestCase):
    def test_a_tree_that_keeps_the_rules_passes(self):
        self.assertEqual(problems({}), 0)

    def test_test_modules_may_use_the_in_memory_adapters(self):
        files = {
            "core/src/app/scan.rs": "#[cfg(test)]\nmod replay;\nuse crate::domain::rule::Rule;\n",
            "core/src/app/scan/replay.rs": "use crate::memory::MemoryTable;\n",
            "core/src/app/track/tests.rs": "use crate::memory::MemoryEc2;\n",
        }
        self.assertEqual(problems(files), 0)

    def test_each_broken_rule_is_one_problem(self):
        cases = {
            "a cycle in app": {"core/src/app/outbox.rs": "use super::scan::Scanner;\n"},
            "a cycle in the cli": {"cli/src/context.rs": "use crate::scan::run;\n"},
            "a cycle through a child module": {
                "infra/market-sim/src/scenario/parse.rs": "use crate::market::valid;\n"
            },
            "a cycle between two files of one folder": {
                "infra/market-sim/src/ram/mod.rs": "mod associations;\nmod shares;\n",
                "infra/market-sim/src/ram/associations.rs": "use super::{Ctx, shares::page_size};\n",
                "infra/market-sim/src/ram/shares.rs": "use super::associations::admit_new;\n",
            },
            "a cycle between two files of a folder inside a folder": {
                "core/src/app/scan/ask.rs": "use crate::app::scan::plan::{self, Plan};\n",
                "core/src/app/scan/plan.rs": "fn f() { crate::app::scan::ask::run() }\n",
            },
            "a cycle in the model (its properties beside it, not inside it)": {
                "verify/src/properties.rs": "use crate::protocol::Protocol;\n",
                "verify/src/protocol.rs": "use crate::properties;\n",
            },
            "a cycle in a function's crate": {
                "functions/track-blocks/src/lib.rs": "mod edge;\nmod probe;\n",
                "functions/track-blocks/src/edge.rs": "use crate::probe::targets;\n",
                "functions/track-blocks/src/probe.rs": "fn f() { crate::edge::settings() }\n",
            },
            "a cycle through an inline path in a shared crate": {
                "shared/src/aws/ram.rs": "fn f() { super::accounts::as_role() }\n",
                "shared/src/aws/accounts.rs": "use super::ram as shares;\n",
            },
            "the domain importing ports": {"core/src/domain/money.rs": "use crate::ports::Clock;\n"},
            "app importing the adapters": {"core/src/app/outbox.rs": "use crate::aws::sns::SnsNotifier;\n"},
            "a port importing the app": {"core/src/ports/store.rs": "use crate::app::scan::Scanner;\n"},
            "the app importing the in-memory adapters": {"core/src/app/outbox.rs": "use crate::memory::MemoryTable;\n"},
            "the in-memory adapters importing the app": {"core/src/memory/table.rs": "use crate::app::scan::Scanner;\n"},
            "a command importing another": {
                "cli/src/cmd/mod.rs": "pub mod scan;\npub mod offerings;\n",
                "cli/src/cmd/scan.rs": "use super::offerings::offering_rows;\n",
                "cli/src/cmd/offerings.rs": "use crate::table;\n",
            },
            "the cli importing the lambda glue": {"cli/src/context.rs": "use capblock_shared::lambda::run_time;\n"},
            "one public type name twice": {
                "core/src/domain/money.rs": "pub struct Step;\n",
                "core/src/domain/rule.rs": "use super::money::Money;\npub enum Step { A }\n",
            },
            "the simulator sharing code": {"infra/market-sim/src/market.rs": "use capblock_shared::domain;\n"},
            "the core depending on the adapters (as a dev-dependency)": {
                "core/Cargo.toml": "[dependencies]\nserde.workspace = true\n\n[dev-dependencies]\ncapblock-shared.workspace = true\n"
            },
            "a function depending on another": {
                "functions/scan-offerings/Cargo.toml": '[dependencies]\ncapblock-shared.workspace = true\ncapblock-track-blocks = { path = "../track-blocks" }\n'
            },
            "the model using the adapters": {"verify/Cargo.toml": "[dependencies]\ncapblock-core.workspace = true\ncapblock-shared.workspace = true\n"},
        }
        for name, files in cases.items():
            with self.subTest(name):
                self.assertEqual(problems(files), 1)

    def test_a_folder_shares_through_its_parent_without_a_cycle(self):
        # Children using their parent's items, and the parent dispatching to them, is no cycle.
        files = {
            "infra/market-sim/src/ram/mod.rs": "mod associations;\nmod shares;\nfn page_size() {}\nfn h() { shares::create() }\n",
            "infra/market-sim/src/ram/associations.rs": "use super::{Ctx, page_size};\n",
            "infra/market-sim/src/ram/shares.rs": "use super::associations::admit_new;\nuse super::page_size;\n",
            "infra/market-sim/src/ram/tests.rs": "use super::shares::create;\nuse super::associations::ORG_ONLY;\n",
        }
        self.assertEqual(problems(files), 0)

    def test_the_model_s_properties_inside_it_are_no_cycle(self):
        files = {
            "verify/src/protocol.rs": "pub mod properties;\nfn properties() { properties::all() }\n",
            "verify/src/protocol/properties.rs": "use crate::protocol::Protocol;\n",
            "verify/src/lib.rs": "pub mod protocol;\npub use protocol::properties;\n",
        }
        self.assertEqual(problems(files), 0)

    def test_use_groups_are_expanded(self):
        self.assertEqual(
            check_layers.expand("super::{Ctx,shares::{self,page_size},associations::admit_new}"),
            ["super::Ctx", "super::shares", "super::shares::page_size", "super::associations::admit_new"],
        )

    def test_tests_and_comments_do_not_count(self):
        self.assertEqual(
            problems(
                {
                    "core/src/domain/money.rs": "// use crate::ports::Clock;\n#[cfg(test)]\nmod tests {\n use crate::ports::Clock;\n}\n",
                }
            ),
            0,
        )


if __name__ == "__main__":
    unittest.main()
