"""Benchmarks: scripts, not tests (``compare.py``)."""
