"""Benchmarks (``make bench``), never part of ``make test``.

Each ``bench/bench_<name>.py`` exposes ``run(results_dir: pathlib.Path) -> dict``; the harness
(``python -m bench [names...]``) writes the dict to ``bench/results/<name>.json``.
"""
