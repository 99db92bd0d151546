"""Self-test of check_docs.py: each kind of broken link or image, missing path or name, stale file
list and drifted data model table is found; a true page passes."""

import pathlib
import tempfile
import unittest

from check_docs import (
    anchor,
    architecture_problems,
    behaviour_problems,
    data_model_problems,
    problems,
)


def write(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


class CheckDocs(unittest.TestCase):
    def test_anchors_follow_githubs_spelling(self):
        self.assertEqual(anchor(" Asking the market within EC2's describe limit"), "asking-the-market-within-ec2s-describe-limit")
        self.assertEqual(anchor("`capblock` CLI: errors"), "capblock-cli-errors")

    def test_each_kind_of_broken_link_is_found(self):
        with tempfile.TemporaryDirectory() as d:
            repo = pathlib.Path(d) / "repo"
            (repo / "docs").mkdir(parents=True)
            (repo / "docs" / "a.md").write_text("# A\n\n## Buying safely\n")
            page = repo / "README.md"
            page.write_text(
                "[ok](docs/a.md#buying-safely) [web](https://example.com) `[code](nowhere.md)`\n"
                "[gone](docs/b.md)\n[anchor](docs/a.md#selling)\n[out](../shared/x.md)\n"
                "```\n[in a code block](nowhere.md)\n```\n"
            )
            found = problems(repo, [page])
            self.assertEqual(len(found), 3, found)
            self.assertIn("no such file", found[0])
            self.assertIn("no heading #selling", found[1])
            self.assertIn("outside the repository", found[2])

    def test_a_broken_image_is_found(self):
        with tempfile.TemporaryDirectory() as d:
            repo = write(pathlib.Path(d), {"docs/chart.svg": "<svg/>", "docs/operate.md": "![ok](chart.svg)\n  ![root-relative](docs/chart.svg)\n"})
            found = problems(repo, [repo / "docs" / "operate.md"])
            self.assertEqual(len(found), 1, found)
            self.assertIn("docs/operate.md:2: docs/chart.svg: no such file", found[0])


CODE = {
    "core/src/app/scan.rs": "pub struct Hands;\nimpl Hands {\n    pub fn live(&self) {}\n}\n",
    "core/src/app/track.rs": "pub enum Observed {\n    Unreadable(String),\n    Gone,\n}\n",
    "core/src/app/mod.rs": "pub mod scan;\npub mod track;\n#[cfg(test)]\nmod fixtures;\n",
    "core/src/app/fixtures.rs": "",
    "cli/src/money_plan.rs": "pub struct Plan {\n    pub share_with: Vec<String>,\n}\n",
    "template.yaml": "Resources:\n  MemberEventsPolicy:\n    Type: AWS::Events::EventBusPolicy\n",
}


class Architecture(unittest.TestCase):
    def problems(self, page: str, **lists) -> list[str]:
        with tempfile.TemporaryDirectory() as d:
            repo = write(pathlib.Path(d), {**CODE, "ARCHITECTURE.md": page})
            return architecture_problems(repo, lists=lists.get("lists", {}), nested_lists={}, named={})

    def test_cited_paths_and_names_that_exist_pass(self):
        page = (
            "`core/src/app/scan.rs` and `app/track.rs` (from core/src), cli/src/money_plan.rs, `core/src/app/`,\n"
            "`Hands`, `Hands::live`, `Observed::Unreadable`, `share_with`,\n"
            "`MemberEventsPolicy` (a template's), HTTP/1.1 and I/O are no paths, [a link](nowhere.md) is the link check's.\n"
        )
        self.assertEqual(self.problems(page), [])

    def test_each_missing_path_or_name_is_found(self):
        page = (
            "`core/src/app/plan.rs`, cli/src/gone.rs, `core/src/ports/`, `functions/<name>/src/lib.rs`\n"
            "`Feet`, `Hands::dead`, `Observed::Lost`, `share_to`\n"
        )
        found = self.problems(page)
        self.assertEqual(len(found), 8, found)
        for missing in ["core/src/app/plan.rs", "cli/src/gone.rs", "core/src/ports/", "functions/<name>/src/lib.rs"]:
            self.assertTrue(any(f"ARCHITECTURE.md:1: {missing}: no such" in p for p in found), (missing, found))
        for missing in ["`Feet`", "`Hands::dead`: dead", "`Observed::Lost`: Lost", "`share_to`"]:
            self.assertTrue(any(f"ARCHITECTURE.md:2: {missing}" in p for p in found), (missing, found))

    def test_the_layer_picture_names_code_only(self):
        # A template's name is fine in prose, not in the picture of the code.
        page = "`MemberEventsPolicy`\n\n## The layers\n\n```\ncore/   `MemberEventsPolicy`\n```\n"
        found = self.problems(page)
        self.assertEqual(len(found), 1, found)
        self.assertIn("ARCHITECTURE.md:6: `MemberEventsPolicy`", found[0])

    def test_a_name_cited_with_a_file_is_named_in_its_code(self):
        # Hands moved (or was renamed): the sentence still cites it with scan.rs / track.
        self.assertEqual(self.problems("`app/scan.rs` (`Hands::live`), core/src/app/track.rs (`Observed::Gone`)\n"), [])
        found = self.problems("`app/track.rs` (`Hands`, `Observed`)\n")
        self.assertEqual(found, ["ARCHITECTURE.md: `Hands` is cited with app/track.rs, whose code never names Hands"])
        lists = {"core/src/app/": "core/src/app"}
        page = "## The layers\n\n```\ncore/src/app/   workflows: scan (`Hands`), track (`Hands`)\n```\n"
        found = self.problems(page, lists=lists)
        self.assertEqual(found, ["ARCHITECTURE.md: `Hands` is cited with core/src/app/track.rs, whose code never names Hands"])

    def test_a_stale_file_list_is_found(self):
        lists = {"core/src/app/": "core/src/app"}
        true = "## The layers\n\n```\ncore/src/app/   workflows, over the ports: scan (plan,\n                ask), track\n```\n"
        self.assertEqual(self.problems(true, lists=lists), [])
        stale = "## The layers\n\n```\ncore/src/app/   workflows, over the ports: scan (plan,\n                ask), reconcile\n```\n"
        found = self.problems(stale, lists=lists)
        self.assertEqual(
            found,
            [
                "ARCHITECTURE.md: core/src/app/ lists reconcile, which is no module of core/src/app",
                "ARCHITECTURE.md: core/src/app/ does not list core/src/app/track",
            ],
        )


ADAPTER = {
    "shared/src/aws/dynamo/rules.rs": (
        'const RULES: &str = "RULES";\n'
        "fn rule_key(id: &str) -> Item {\n"
        '    key(format!("RULE#{id}"), "RULE") // "OLD#{id}" in a comment is no key\n'
        "}\n"
        "fn money(item: &Item) -> Money {\n"
        '    Money::parse(get_s(item, "currency").unwrap_or("USD"))\n'
        "}\n"
    ),
    "shared/src/aws/dynamo/outbox.rs": (
        'fn pending() { q.value(":p", s("NOTICE#")).value(":k", s(format!("BLOCK#{thread}"))) }\n'
        '#[cfg(test)]\nmod tests {\n    const T: &str = "TEST#";\n}\n'
    ),
    "shared/src/aws/probe.rs": 'const PROBE_PK: &str = "PREFLIGHT#PROBE";\n',
}
TABLE = (
    "# Architecture\n\n## The data model\n\n"
    "| item | pk | sk | gsi1pk / gsi1sk | notes |\n|---|---|---|---|---|\n"
    "| rule | `RULE#<id>` | `RULE` | `RULES` / `<id>` | `version` |\n"
    "| notice | `BLOCK#<thread>` | `NOTICE#<milestone>` | | |\n"
    "| probe | `PREFLIGHT#PROBE` | `<kind>#<try>` | | |\n"
    "\n## Where a change goes\n"
)


class DataModel(unittest.TestCase):
    def problems(self, table: str, adapter: dict[str, str] | None = None) -> list[str]:
        with tempfile.TemporaryDirectory() as d:
            repo = write(pathlib.Path(d), {**(ADAPTER if adapter is None else adapter), "ARCHITECTURE.md": table})
            return data_model_problems(repo)

    def test_a_table_true_to_the_adapter_passes(self):
        self.assertEqual(self.problems(TABLE), [])

    def test_a_key_the_adapter_writes_missing_from_the_table_fails(self):
        found = self.problems(TABLE.replace("| `RULES` / `<id>` |", "| |"))
        self.assertEqual(found, ["shared/src/aws/dynamo/rules.rs: writes the key RULES, which ARCHITECTURE.md's data model table lacks"])

    def test_a_key_in_the_table_the_adapter_does_not_write_fails(self):
        found = self.problems(TABLE.replace("`NOTICE#<milestone>`", "`MESSAGE#<milestone>`"))
        self.assertEqual(len(found), 2, found)
        self.assertIn("ARCHITECTURE.md:8: the data model's key MESSAGE#* is written nowhere", found[0])
        self.assertIn("writes the key NOTICE#, which ARCHITECTURE.md's data model table lacks", found[1])

    def test_a_key_of_another_shape_fails(self):
        adapter = {**ADAPTER, "shared/src/aws/probe.rs": 'const PROBE_PK: &str = "PREFLIGHT#PROBE#V2";\n'}
        found = self.problems(TABLE, adapter)
        self.assertEqual(len(found), 2, found)

    def test_no_table_fails(self):
        self.assertEqual(len(self.problems("# Architecture\n")), 1)


class Behaviours(unittest.TestCase):
    """The EC2 behaviours table: a picture that no longer names what the table cites, a cited
    file gone, and a "not played" without a reason are each found; a true table passes."""

    HEAD = "| behaviour | source | simulator | in-memory EC2 | model |\n|---|---|---|---|---|\n"
    ROW = "| Listed late | README | `sim.rs`: `listing_lag` | `mem.rs`: `listed_from` | not played: the model has no clock of lags |\n"

    def found(self, table: str, files: dict[str, str]) -> list[str]:
        with tempfile.TemporaryDirectory() as d:
            repo = write(pathlib.Path(d), {"infra/market-sim/behaviours.md": table, **files})
            return behaviour_problems(repo)

    def test_a_true_table_passes(self):
        files = {"sim.rs": "let listing_lag = 1;", "mem.rs": "listed_from: now"}
        self.assertEqual(self.found(self.HEAD + self.ROW, files), [])

    def test_a_picture_that_lost_its_behaviour_is_found(self):
        found = self.found(self.HEAD + self.ROW, {"sim.rs": "let lag = 1;", "mem.rs": "listed_from: now"})
        self.assertEqual(len(found), 1, found)
        self.assertIn("simulator: sim.rs no longer names listing_lag", found[0])

    def test_a_gone_file_and_a_reasonless_not_played_are_found(self):
        row = "| Listed late | README | `sim.rs`: `listing_lag` | `gone.rs`: `x` | not played: |\n"
        found = self.found(self.HEAD + row, {"sim.rs": "listing_lag"})
        self.assertEqual(len(found), 2, found)
        self.assertIn("no file gone.rs", found[0])
        self.assertIn("model not played, with no reason", found[1])


if __name__ == "__main__":
    unittest.main()
