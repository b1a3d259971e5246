"""The speed yardstick every speed benchmark divides by: the shared bare FCFS+EASY loop.

Speed figures move between machines and with the load, so each benchmark
(``benchmarks/replay.py``, ``rl_replay.py``, ``window_eval.py``,
``env_steps.py``) runs ``../shared/tools/ref_easy.py`` (not part of this
repository) in the same minute and prints its own rate as a ratio to the
yardstick's.
"""

from __future__ import annotations

import json
import subprocess
import sys

__all__ = ["run_yardstick"]


def run_yardstick(path: str, trace: str) -> dict:
    """Run the yardstick at ``path`` on ``trace`` with EASY; its JSON report plus ``jobs_per_s``
    (jobs simulated over parse and simulation seconds)."""
    out = subprocess.run([sys.executable, path, trace, "--bf", "easy"],
                         capture_output=True, text=True, check=True)
    ref = json.loads(out.stdout)
    ref["jobs_per_s"] = ref["jobs_simulated"] / (ref["parse_s"] + ref["sim_s"])
    return ref
