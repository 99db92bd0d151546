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
        "shared/src/app/scan.rs": "use super::outbox::flush;\nuse crate::domain::rule::Rule;\n",
        "shared/src/app/outbox.rs": "use crate::ports::Notifier;\n",
        "shared/src/domain/rule.rs": "use super::money::Money;\n",
        "shared/src/domain/money.rs": "",
        "shared/src/ports.rs": "use crate::domain::rule::Rule;\n",
        "cli/src/main.rs": "mod scan;\n",
        "cli/src/scan.rs": "use crate::context::Ctx;\n",
        "cli/src/context.rs": "",
        "infra/market-sim/src/lib.rs": "",
        "infra/market-sim/src/market.rs": "use crate::scenario::Scenario;\n",
        "infra/market-sim/src/scenario.rs": "",
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

    def test_a_cycle_in_app_fails(self):
        self.assertEqual(problems({"shared/src/app/outbox.rs": "use super::scan::Scanner;\n"}), 1)

    def test_a_cycle_in_the_cli_fails(self):
        self.assertEqual(problems({"cli/src/context.rs": "use crate::scan::run;\n"}), 1)

    def test_a_cycle_through_a_child_module_fails(self):
        self.assertEqual(
            problems({"infra/market-sim/src/scenario/parse.rs": "use crate::market::valid;\n"}), 1
        )

    def test_the_domain_may_not_import_ports(self):
        self.assertEqual(problems({"shared/src/domain/money.rs": "use crate::ports::Clock;\n"}), 1)

    def test_app_may_not_import_the_adapters(self):
        self.assertEqual(problems({"shared/src/app/outbox.rs": "use crate::aws::sns::SnsNotifier;\n"}), 1)

    def test_the_simulator_shares_no_code(self):
        self.assertEqual(problems({"infra/market-sim/src/market.rs": "use capblock_shared::domain;\n"}), 1)

    def test_tests_and_comments_do_not_count(self):
        self.assertEqual(
            problems(
                {
                    "shared/src/domain/money.rs": "// use crate::ports::Clock;\n#[cfg(test)]\nmod tests {\n use crate::ports::Clock;\n}\n",
                }
            ),
            0,
        )


if __name__ == "__main__":
    unittest.main()
