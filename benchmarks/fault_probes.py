"""Issue 21's two fault probes: wall time and peak memory of each ``cosim run``.

Before the fix neither ended (the first grew past 600 MB in 45 s, the
second ran 11 minutes to 6.4 GB); both should now finish in seconds and say
how many jobs never started. Each probe runs in its own process, with a
timeout, so a regression shows as ``timed out`` rather than a hang::

    python benchmarks/fault_probes.py [--timeout 120] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBES = {
    "50 jobs, 64 nodes, mtbf=mttr=2000": [
        "workload.jobs=50", "cluster.nodes=64", "faults.mtbf=2000", "faults.mttr=2000"],
    "3000 jobs, mtbf=1e5, mttr=7200, fail, 1 attempt, tsafrir": [
        "workload.jobs=3000", "faults.mtbf=1e5", "faults.mttr=7200", "faults.on_failure=fail",
        "faults.max_attempts=1", "workload.estimates.model=tsafrir"],
}

# Runs the CLI and prints the peak resident memory of that process (KB on Linux).
_CHILD = ("import resource, sys, runpy; sys.argv = ['cosim'] + sys.argv[1:];\n"
          "try:\n    runpy.run_module('cosim', run_name='__main__')\n"
          "finally:\n    print('maxrss_kb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,"
          " file=sys.stderr)")


def main() -> int:
    """Run each probe ``--repeat`` times; print wall seconds, peak MB and jobs never started."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'probe':58s} {'wall s':>7s} {'peak MB':>8s} {'never started':>14s}")
    for name, sets in PROBES.items():
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                cmd = [sys.executable, "-c", _CHILD, "run", "scenarios/lublin256.yaml",
                       "--policy", "fcfs+easy", "--no-plots", "--quiet", "--out", f"{tmp}/r"]
                for s in sets:
                    cmd += ["--set", s]
                t0 = time.perf_counter()
                try:
                    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                                       timeout=args.timeout)
                except subprocess.TimeoutExpired:
                    print(f"{name:58s} timed out after {args.timeout:g} s")
                    continue
                wall = time.perf_counter() - t0
                rss = next((int(ln.split()[1]) for ln in p.stderr.splitlines()
                            if ln.startswith("maxrss_kb")), 0)
                summary = Path(tmp) / "r" / "fcfs+easy" / "summary.json"
                never = (json.loads(summary.read_text())["metrics"].get("jobs_never_started")
                         if summary.exists() else f"rc={p.returncode}")
                print(f"{name:58s} {wall:7.2f} {rss / 1024:8.0f} {never!s:>14s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
