"""Pass or fail from a compat-matrix report's JSON alone (schema 3): `python gate.py REPORT.json [CONCLUSION…]`
exits 1 where an audited override reaches one of the conclusions (default: harmful) on a tested release that is no
pre-release, naming each, and 0 otherwise. Standard library only; it reads ids, never prose."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator


def failures(report: dict, fail_on: tuple[str, ...] = ("harmful",)) -> Iterator[str]:
    if report.get("schema") != 3:
        raise SystemExit(f"a report of schema 3 expected, not {report.get('schema')!r}")
    releases = {r["id"]: r for r in report["releases"]}
    for override in report["overrides"]:
        for release, conclusion in override["by_release"].items():
            if conclusion.replace(" ", "-") in fail_on and not releases[release]["early"]:
                yield f"{override['target']} {override['name']}: {conclusion} on {releases[release]['label']}"


def main(argv: list[str]) -> int:
    path, *kinds = argv
    with open(path, encoding="utf-8") as file:
        found = list(failures(json.load(file), tuple(kinds) or ("harmful",)))
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
