#!/usr/bin/env python3
"""docs/handoff.md's SkyPilot recipe, checked against SkyPilot itself, offline.

Run: infra/handoff/test.sh (installs the pinned SkyPilot into a cached venv), or
     $SKYPILOT_VENV/bin/python infra/handoff/test_skypilot_recipe.py

- the config the recipe layers onto a launch (infra/examples/skypilot/config.yaml, the one
  launch-on-block.sh writes, the one the doc shows) passes SkyPilot's own config validation
  (`sky.skypilot_config.parse_and_validate_config_file`, what `sky launch --config FILE` runs),
  and the keys the old recipe used are refused by it;
- the example task passes SkyPilot's task schema (`sky.utils.schemas.get_task_schema`);
- every `sky` command in the wrapper and in the doc parses with SkyPilot's own click CLI, option
  callbacks included (`--config FILE` loads and validates the file there); the old recipe's
  `--use-spot=false` does not;
- what the recipe relies on SkyPilot for: aws.* keys cannot be set from a task's `config:`, and
  SkyPilot only takes a reservation EC2 lists as active (else it launches on-demand), which is
  why the wrapper waits.

Nothing here calls a cloud or starts SkyPilot's API server: SkyPilot runs with a throwaway HOME
and working directory, so no ~/.sky or .sky.yaml of the user's counts or changes.
"""

from __future__ import annotations

import atexit
import os
import re
import shlex
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "infra" / "examples" / "skypilot"
CONFIG = EXAMPLES / "config.yaml"
TASK = EXAMPLES / "task.yaml"
WRAPPER = EXAMPLES / "launch-on-block.sh"
DOC = REPO / "docs" / "handoff.md"
REQUIREMENTS = REPO / "infra" / "handoff" / "skypilot-requirements.txt"

# SkyPilot reads ~/.sky/config.yaml, ./.sky.yaml and these variables: none of the user's may
# leak into the check, and the CLI writes under ~/.sky.
SANDBOX = tempfile.mkdtemp(prefix="capblock-skypilot-")
atexit.register(shutil.rmtree, SANDBOX, ignore_errors=True)
os.environ["HOME"] = SANDBOX
for var in ("SKYPILOT_CONFIG", "SKYPILOT_GLOBAL_CONFIG", "SKYPILOT_PROJECT_CONFIG"):
    os.environ.pop(var, None)
os.environ["SKYPILOT_DISABLE_USAGE_COLLECTION"] = "1"
os.chdir(SANDBOX)

# Only now: SkyPilot reads HOME and the working directory when imported.
import click
import sky
import yaml
from sky import skypilot_config
from sky.client.cli import command
from sky.skylet import constants
from sky.utils import common_utils, schemas

# Example values for the shell variables and `$(field X)` lookups in the recipe's commands.
VARS = {
    "cfg": str(CONFIG),
    "task": str(TASK),
    "cluster": "capblock-p5-weekly",
    "region": "us-east-1",
    "nodes": "2",
    "id": "cr-0a1b2c3d4e5f60718",
    "stack": "capblock",
    "STACK": "capblock",
}
FIELDS = {"availability_zone": "us-east-1a", "instance_type": "p5.48xlarge"}


def substitute(line: str) -> str:
    """The command line with example values in place of the shell's."""

    def field(m: re.Match) -> str:
        if m.group(1) not in FIELDS:
            raise KeyError(f"no example value for $(field {m.group(1)}): add it to FIELDS")
        return FIELDS[m.group(1)]

    def var(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        if name not in VARS:
            raise KeyError(f"no example value for ${name}: add it to VARS")
        return VARS[name]

    line = re.sub(r"\$\(field (\w+)\)", field, line)
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", var, line)


def sky_commands(text: str) -> list[str]:
    """Every `sky ...` command line of a shell script or of a Markdown page's code (fenced
    blocks and inline spans), continuation lines joined. An inline span that only names a
    command (`sky jobs launch`) is a reference, not a command line."""
    lines = re.sub(r"\\\n\s*", " ", text).splitlines()
    out = [l.strip() for l in lines if re.match(r"\s*sky \w", l)]
    spans = [" ".join(m.split()) for m in re.findall(r"`(sky [^`]+)`", text)]
    return out + [s for s in spans if not re.fullmatch(r"sky( [a-z]+)+", s)]


def fenced(text: str, lang: str) -> list[str]:
    return re.findall(rf"^[ \t]*```{lang}\n(.*?)^[ \t]*```", text, re.DOTALL | re.MULTILINE)


def parse(argv: list[str]) -> dict:
    """Parses `sky ARGV` as SkyPilot's CLI does, callbacks included, without running it:
    click raises a UsageError (BadParameter, NoSuchOption, ...) on anything it refuses."""
    cli = command.cli
    ctx = cli.make_context("sky", list(argv))
    group, args = cli, ctx.protected_args + ctx.args
    while True:
        name, cmd, rest = group.resolve_command(ctx, args)
        if isinstance(cmd, click.Group):
            ctx = cmd.make_context(name, rest, parent=ctx)
            group, args = cmd, ctx.protected_args + ctx.args
            continue
        return cmd.make_context(name, rest, parent=ctx).params


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


class Config(unittest.TestCase):
    def test_skypilot_is_the_pinned_version(self):
        pinned = re.search(r"^skypilot==(\S+)$", REQUIREMENTS.read_text(encoding="utf-8"), re.MULTILINE)
        self.assertIsNotNone(pinned)
        self.assertEqual(sky.__version__, pinned.group(1))

    def test_the_example_config_passes_skypilots_validation(self):
        config = dict(skypilot_config.parse_and_validate_config_file(str(CONFIG)))
        self.assertEqual(set(config), {"aws"})
        self.assertEqual(set(config["aws"]), {"specific_reservations", "labels"})
        self.assertRegex(config["aws"]["specific_reservations"][0], r"^cr-[0-9a-f]{17}$")
        self.assertIn("capblock:handoff", config["aws"]["labels"])

    def test_skypilot_refuses_what_the_old_recipe_wrote(self):
        # aws.instance_tags left the schema (aws.labels replaced it): the check must fail on it.
        old = {"aws": {"specific_reservations": ["cr-0a1b2c3d4e5f60718"],
                       "instance_tags": {"capblock:handoff": "capblock"}}}
        path = Path(SANDBOX) / "old.yaml"
        path.write_text(yaml.safe_dump(old), encoding="utf-8")
        with self.assertRaisesRegex(ValueError, "instance_tags"):
            skypilot_config.parse_and_validate_config_file(str(path))

    def test_the_wrapper_writes_the_example_configs_shape(self):
        script = WRAPPER.read_text(encoding="utf-8")
        m = re.search(r'cat >"\$cfg" <<YAML\n(.*?)^YAML$', script, re.DOTALL | re.MULTILINE)
        self.assertIsNotNone(m, "launch-on-block.sh writes no config heredoc")
        written = yaml.safe_load(substitute(m.group(1)))
        self.assertEqual(written, load(CONFIG))
        common_utils.validate_schema(written, schemas.get_config_schema(), skip_none=False)

    def test_the_doc_shows_the_example_config(self):
        blocks = [b for b in fenced(DOC.read_text(encoding="utf-8"), "yaml") if "specific_reservations" in b]
        self.assertEqual(len(blocks), 1, "one SkyPilot config block in docs/handoff.md")
        self.assertEqual(yaml.safe_load(blocks[0]), load(CONFIG))

    def test_a_tasks_config_block_cannot_name_the_reservation(self):
        # Why the recipe layers a config file with --config rather than a task's `config:`.
        for key in [("aws", "specific_reservations"), ("aws", "labels"), ("aws",)]:
            self.assertNotIn(key, constants.OVERRIDEABLE_CONFIG_KEYS_IN_TASK)


class Task(unittest.TestCase):
    def test_the_example_task_passes_skypilots_task_schema(self):
        task = load(TASK)
        common_utils.validate_schema(task, schemas.get_task_schema(), "task.yaml: ")
        self.assertIs(task["resources"]["use_spot"], False)

    def test_the_task_schema_can_fail(self):
        with self.assertRaises(ValueError):
            common_utils.validate_schema({"resources": {"use_spot": "false"}, "runs": "x"},
                                         schemas.get_task_schema())


class Commands(unittest.TestCase):
    def check(self, where: str, text: str) -> set[str]:
        seen = set()
        for line in sky_commands(text):
            argv = shlex.split(substitute(line))
            with self.subTest(where=where, command=line):
                try:
                    params = parse(argv[1:])
                except click.ClickException as e:
                    self.fail(f"{where}: `{line}`: {e.format_message()}")
                seen.add(" ".join(a for a in argv[1:3] if not a.startswith("-")))
                if "--config" in argv:
                    self.assertEqual(params.get("config_override"), load(CONFIG))
        return seen

    def test_the_wrappers_commands_parse(self):
        seen = self.check("launch-on-block.sh", WRAPPER.read_text(encoding="utf-8"))
        self.assertLessEqual({"launch", "down"}, {s.split()[0] for s in seen})

    def test_the_docs_commands_parse(self):
        seen = self.check("docs/handoff.md", DOC.read_text(encoding="utf-8"))
        self.assertIn("launch", {s.split()[0] for s in seen})

    def test_use_spot_takes_no_value(self):
        # The old recipe's spelling; what a bad command looks like to `check`.
        with self.assertRaisesRegex(click.UsageError, "does not take a value"):
            parse(["launch", "-c", "train", "--use-spot=false", str(TASK)])
        self.assertIs(parse(["launch", "--no-use-spot", str(TASK)])["use_spot"], False)

    def test_a_config_file_is_validated_when_parsed(self):
        bad = Path(SANDBOX) / "bad.yaml"
        bad.write_text("aws:\n  instance_tags: {a: b}\n", encoding="utf-8")
        with self.assertRaises(click.BadParameter):
            parse(["launch", "--config", str(bad), str(TASK)])


class Behaviour(unittest.TestCase):
    """What SkyPilot's AWS provisioning does that the recipe works around (read from the
    pinned version's source, so a SkyPilot bump that changes it fails here)."""

    def test_only_active_reservations_are_taken(self):
        import inspect

        from sky.clouds.utils import aws_utils
        from sky.provision.aws import instance

        listing = inspect.getsource(aws_utils.list_reservations_for_instance_type)
        self.assertIn("'Values': ['active']", listing)
        # What the reservation cannot hold is created as ordinary instances.
        self.assertIn("created_remaining_instances = _create_instances", inspect.getsource(instance))


if __name__ == "__main__":
    unittest.main(verbosity=2)
