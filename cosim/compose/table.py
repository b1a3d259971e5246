"""The comparison table of ``cosim run`` and the per-policy progress bar (stderr)."""

from __future__ import annotations

import sys
import time
from typing import Any

from cosim.metrics import starves

__all__ = ["TABLE_COLUMNS", "STARVES_MARK", "comparison_table", "Progress", "PROGRESS_DELAY_S"]

#: Wall seconds a policy runs before its progress bar appears (stderr).
PROGRESS_DELAY_S = 2.0

#: (summary key, header, format) of the comparison table printed by ``run``:
#: ``util`` is useful utilization (completed attempts), ``busy`` counts every
#: attempt, ``wasted core-h`` is their difference (timeouts, kills, failures),
#: ``jain`` is Jain's fairness over users' mean bsld (``docs/metrics.md``).
#: Starvation stands beside the mean: the 99th-percentile and the longest
#: wait, and the jobs that waited more than a day and a week (count and share,
#: ``starved_1d`` / ``starved_1d_share`` and the week's).
TABLE_COLUMNS = [
    ("jobs_finished", "jobs", "{:.0f}"),
    ("bsld_mean", "mean bsld", "{:.2f}"),
    ("wait_mean", "mean wait s", "{:.0f}"),
    ("wait_p99", "p99 wait s", "{:.0f}"),
    ("wait_max", "max wait s", "{:.0f}"),
    ("starved_1d", "waited >1d", "{:.0f}"),
    ("starved_1w", "waited >1w", "{:.0f}"),
    ("slowdown_mean", "mean sld", "{:.2f}"),
    ("response_mean", "mean resp s", "{:.0f}"),
    ("utilization", "util", "{:.3f}"),
    ("utilization_busy", "busy", "{:.3f}"),
    ("queue_len_mean", "mean queue", "{:.1f}"),
    ("wasted_core_hours", "wasted core-h", "{:.1f}"),
    ("fairness_jain", "jain", "{:.3f}"),
    ("bsld_worst_user_mean", "worst user bsld", "{:.1f}"),
    ("jobs_per_second", "sim jobs/s", "{:.0f}"),
]

#: The mark after the week's count of a policy that starved a job for a week.
STARVES_MARK = "!"


def _cell(summary: dict[str, Any], key: str, fmt: str) -> str:
    v = summary.get(key)
    if v is None:
        return "-"
    text = fmt.format(v)
    share = summary.get(f"{key}_share") if key.startswith("starved_") else None
    if share is not None and v:
        text += f" ({share:.1%})"
    if key == "starved_1w" and starves(summary):
        text += f" {STARVES_MARK}"
    return text


def comparison_table(summaries: dict[str, dict[str, Any]]) -> str:
    """A plain-text table, one row per policy; below it, a line naming the
    policies that starved a job for more than a week, when any did."""
    headers = ["policy"] + [h for _, h, _ in TABLE_COLUMNS]
    rows = [[name] + [_cell(s, key, fmt) for key, _, fmt in TABLE_COLUMNS]
            for name, s in summaries.items()]
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                       for i, (h, w) in enumerate(zip(headers, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))))
    starving = [name for name, s in summaries.items() if starves(s)]
    if starving:
        lines.append(f"{STARVES_MARK} starves: a job waited more than a week under "
                     + ", ".join(starving))
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
