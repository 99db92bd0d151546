"""Self-test of check_docs.py: each kind of broken link is found, a good one is not."""

import pathlib
import tempfile
import unittest

from check_docs import anchor, problems


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


if __name__ == "__main__":
    unittest.main()
