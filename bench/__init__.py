"""Threadline's benchmarks: what a user of a harness server pays, as ratios measured in one run.

`python -m bench` runs every section and writes `bench/results/latest.json`; see `bench/__main__.py`
and docs/performance.md.
"""
