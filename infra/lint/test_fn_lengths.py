"""fn_lengths.py's own tests: what counts as a production function and how long it is."""

import contextlib
import io
import pathlib
import tempfile
import unittest

import fn_lengths


def body(n):
    """`n` lines of a function body, one with a brace in a string and one in a comment."""
    lines = ['        let s = "}";', "        // }"]
    return "\n".join(lines + ["        x += 1;"] * (n - len(lines)))


class FnLengthsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.repo = pathlib.Path(self.dir.name)

    def tearDown(self):
        self.dir.cleanup()

    def run_main(self, *args):
        """`fn_lengths.main`'s exit code, its report kept off the test's output."""
        with contextlib.redirect_stdout(io.StringIO()):
            return fn_lengths.main([str(self.repo), *args])

    def write(self, rel, text):
        path = self.repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def test_a_function_is_measured_from_fn_to_its_closing_brace(self):
        self.write(
            "core/src/a.rs", f"pub fn long() {{\n{body(81)}\n}}\n\nfn short() {{\n}}\n"
        )
        found = fn_lengths.functions(self.repo, pathlib.Path("core/src/a.rs"))
        self.assertEqual(found, [("long", 1, 83, False), ("short", 85, 2, False)])

    def test_test_code_is_left_out(self):
        self.write(
            "core/src/a.rs",
            f"#[cfg(test)]\nmod tests {{\n    fn in_tests() {{\n{body(90)}\n    }}\n}}\n",
        )
        self.write("core/src/a/tests.rs", f"fn t() {{\n{body(90)}\n}}\n")
        self.write("tests/src/lib.rs", f"fn t() {{\n{body(90)}\n}}\n")
        files = list(fn_lengths.production_files(self.repo))
        self.assertEqual(files, [pathlib.Path("core/src/a.rs")])
        self.assertEqual(fn_lengths.functions(self.repo, files[0]), [])

    def test_a_reason_in_the_doc_excuses_a_long_function(self):
        self.write(
            "core/src/a.rs",
            f"/// Long because one table.\nasync fn t() {{\n{body(90)}\n}}\n",
        )
        [(_, _, _, excused)] = fn_lengths.functions(
            self.repo, pathlib.Path("core/src/a.rs")
        )
        self.assertTrue(excused)
        self.assertEqual(self.run_main("--check"), 0)

    def test_check_fails_on_an_unexcused_long_function(self):
        self.write("core/src/a.rs", f"fn t() {{\n{body(90)}\n}}\n")
        self.assertEqual(self.run_main("--check"), 1)
        self.assertEqual(self.run_main(), 0)


if __name__ == "__main__":
    unittest.main()
