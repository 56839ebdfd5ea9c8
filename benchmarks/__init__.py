"""Benchmarks: ``python -m benchmarks [bench_name ...]`` (see ``__main__``).

Every ``bench_*.py`` module here defines ``main() -> dict``; the runner merges the
returned dicts into ``benchmarks/results.json`` and renders ``benchmarks/results.md``.
"""
