"""The comparison table of ``cosim run`` and the per-policy progress bar (stderr)."""

from __future__ import annotations

import sys
import time
from typing import Any

__all__ = ["TABLE_COLUMNS", "comparison_table", "Progress", "PROGRESS_DELAY_S"]

#: Wall seconds a policy runs before its progress bar appears (stderr).
PROGRESS_DELAY_S = 2.0

#: (summary key, header, format) of the comparison table printed by ``run``:
#: ``util`` is useful utilization (completed attempts), ``busy`` counts every
#: attempt, ``wasted core-h`` is their difference (timeouts, kills, failures),
#: ``jain`` is Jain's fairness over users' mean bsld (``docs/metrics.md``).
TABLE_COLUMNS = [
    ("jobs_finished", "jobs", "{:.0f}"),
    ("wait_mean", "mean wait s", "{:.0f}"),
    ("wait_max", "max wait s", "{:.0f}"),
    ("slowdown_mean", "mean sld", "{:.2f}"),
    ("bsld_mean", "mean bsld", "{:.2f}"),
    ("response_mean", "mean resp s", "{:.0f}"),
    ("utilization", "util", "{:.3f}"),
    ("utilization_busy", "busy", "{:.3f}"),
    ("queue_len_mean", "mean queue", "{:.1f}"),
    ("wasted_core_hours", "wasted core-h", "{:.1f}"),
    ("fairness_jain", "jain", "{:.3f}"),
    ("bsld_worst_user_mean", "worst user bsld", "{:.1f}"),
    ("jobs_per_second", "sim jobs/s", "{:.0f}"),
]


def comparison_table(summaries: dict[str, dict[str, Any]]) -> str:
    """A plain-text table, one row per policy."""
    headers = ["policy"] + [h for _, h, _ in TABLE_COLUMNS]
    rows = []
    for name, s in summaries.items():
        row = [name]
        for key, _, fmt in TABLE_COLUMNS:
            v = s.get(key)
            row.append("-" if v is None else fmt.format(v))
        rows.append(row)
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                       for i, (h, w) in enumerate(zip(headers, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)


class Progress:
    """A progress bar on stderr for one policy: jobs done of jobs in the workload.

    It appears only once the policy has run for :data:`PROGRESS_DELAY_S`
    wall seconds (short runs print nothing) and clears itself when done.
    """

    def __init__(self, sim, label: str, enabled: bool):
        self.sim = sim
        self.bar = None
        self.t0 = time.monotonic()
        if enabled:
            from cosim.cli import progress_bar as tqdm  # no \r frames in logs

            self.bar = tqdm(total=len(sim.workload), desc=label, unit="job", file=sys.stderr,
                            leave=False, delay=PROGRESS_DELAY_S, dynamic_ncols=True)

    def update(self) -> None:
        """Show the jobs done so far."""
        if self.bar is not None:
            self.bar.update(self.sim.scheduler.done_count - self.bar.n)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.update()
            if time.monotonic() - self.t0 >= PROGRESS_DELAY_S:
                self.bar.refresh()   # the final count, before the bar clears itself
            self.bar.close()
