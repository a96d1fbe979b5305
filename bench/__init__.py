"""``make bench``: performance and cost figures, measured side by side in one run.

Not shipped (nothing under ``functions/`` imports it). ``python -m bench`` writes
``docs/benchmarks.md``, ``docs/benchmarks.json`` and ``docs/cost.md``.
"""
