#!/usr/bin/env python3
"""Validate capblock's EventBridge events against their JSON Schemas.

Usage: validate_events.py SCHEMA_DIR < events.jsonl

Each input line is one whole event (as a rule's target receives it). The schema is picked by
the event's detail-type (core/schemas/events/<detail-type, kebab-case>.schema.json). Exits 1
and names every event that does not validate (or has no schema); prints one line per event.
"""

import json
import pathlib
import sys

import jsonschema


def main():
    schema_dir = pathlib.Path(sys.argv[1])
    status = 0
    for n, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        event = json.loads(line)
        detail_type = event.get("detail-type", "")
        path = schema_dir / (detail_type.lower().replace(" ", "-") + ".schema.json")
        if not path.is_file():
            print(f"event {n}: no schema for detail-type {detail_type!r}")
            status = 1
            continue
        schema = json.loads(path.read_text())
        validator = jsonschema.Draft202012Validator(
            schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
        )
        errors = sorted(validator.iter_errors(event), key=lambda e: list(e.path))
        if errors:
            status = 1
            for e in errors:
                where = "/".join(str(p) for p in e.path) or "(event)"
                print(f"event {n} ({detail_type}): {where}: {e.message}")
        else:
            print(f"event {n} ({detail_type}): valid")
    sys.exit(status)


if __name__ == "__main__":
    main()
