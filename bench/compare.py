"""Benchmark results side by side: `python -m bench.compare A.json B.json ...`.

Prints one row per ratio of the first file (then any the others add), one column per file, and the
target; a target met in every file is marked `yes`, one missed in any file `NO`. For recording a
change that must not make the bench slower: run `python -m bench` before and after (twice each, on a
shared machine), then compare the four files.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ("compare",)


def compare(reports: list[dict[str, Any]], labels: list[str]) -> str:
    """The table of every ratio of `reports`, one column per report, labelled `labels`."""
    names: list[str] = []
    for report in reports:
        names.extend(name for name in report["ratios"] if name not in names)
    width = max(10, *(len(label) for label in labels))
    first = max(len(name) for name in names)
    header = (
        f"{'measure':<{first}} " + " ".join(f"{label:>{width}}" for label in labels) + f"  {'target':>8}  met"
    )
    lines = [header, "-" * len(header)]
    for name in names:
        cells = []
        for report in reports:
            value = report["ratios"].get(name)
            cells.append(f"{value:>{width}.3f}" if value is not None else f"{'-':>{width}}")
        line = f"{name:<{first}} " + " ".join(cells)
        targets = [r["targets"][name] for r in reports if name in r.get("targets", {})]
        if targets:
            target = f"{targets[0]['comparison']} {targets[0]['threshold']}"
            line += f"  {target:>8}  {'yes' if all(t['met'] for t in targets) else 'NO'}"
        lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="JSON files written by `python -m bench`")
    args = parser.parse_args(argv)
    reports = [json.loads(path.read_text()) for path in args.results]
    print(compare(reports, [path.stem for path in args.results]))
    for path, report in zip(args.results, reports, strict=True):
        load = report.get("machine", {}).get("load_average_at_start")
        print(
            f"{path.stem}: {report.get('generated_at')}, load at start {load}, {report.get('duration_s')} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
