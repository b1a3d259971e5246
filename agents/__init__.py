"""Scheduling policies: classic heuristics with backfilling, and learning agents."""

__all__: list[str] = []
