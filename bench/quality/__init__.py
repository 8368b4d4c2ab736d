"""Recall quality: LoCoMo's turn-retrieval task through the real HTTP API of ``engram serve``.

- ``locomo``: loads a LoCoMo file or folder into conversations (memories) and questions;
- ``metrics``: R@k and MRR, overall and per category;
- ``configs``: the served configurations compared side by side (keyword; more can be added);
- ``runner``: the embedded PostgreSQL, the served instances, indexing, queries, the baseline;
- ``report``: the report's "Recall quality" section.

Run by ``make eval`` (alone) and ``make bench`` (with the others) through
``bench/bench_quality.py``.
"""
