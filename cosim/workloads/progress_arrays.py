"""A progress source's logs as flat arrays, observed for many (job, elapsed) pairs at once.

The prediction hub's in-process path (:mod:`cosim.prediction_hub`) builds the
remaining-time model's batch from these arrays instead of per-job lists.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["FlatProgress"]


class FlatProgress:
    """A progress source's ionic steps and SCF lines as flat arrays, observed in batches.

    Gives the same observation as the source's ``progress_at``,
    ``progress_log``, ``scf_trace`` and ``startup_at`` (of a generated VASP
    workload, :class:`cosim.workloads.vasp.VaspJobs`), for many (job,
    elapsed) pairs at once, as the arrays of an in-process remaining batch.
    """

    def __init__(self, offsets, elapsed, denergy, max_force, scf_steps, startup,
                 scf_offsets, scf_de):
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.ends = np.asarray(elapsed, dtype=np.float64)
        self.scf_steps = np.asarray(scf_steps)
        self.values = np.column_stack([self.ends, np.asarray(denergy, dtype=np.float64),
                                       np.asarray(max_force, dtype=np.float64),
                                       self.scf_steps.astype(np.float64)])
        self.startup = np.asarray(startup, dtype=np.float64)
        self.scf_offsets = None if scf_offsets is None else np.asarray(scf_offsets, np.int64)
        self.scf_de = None if scf_de is None else np.asarray(scf_de).astype(np.float64)

    @classmethod
    def of(cls, source) -> FlatProgress | None:
        """The flat view of ``source``, or None when it keeps no flat arrays."""
        try:
            return cls(source.offsets, source.elapsed, source.denergy, source.max_force,
                       source.scf_steps, source.render["startup"],
                       getattr(source, "scf_offsets", None), getattr(source, "scf_de", None))
        except (AttributeError, KeyError, TypeError, ValueError):
            return None

    def _observe(self, i: int, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``progress_at(i, e)`` for an array of elapsed times: steps done, SCF lines done."""
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        ends = self.ends[lo:hi]
        done = np.searchsorted(ends, e, side="right")
        under_way = done < hi - lo
        d = np.minimum(done, max(hi - lo - 1, 0))
        start = np.where(done == 0, self.startup[i], ends[np.maximum(d - 1, 0)] if len(ends)
                         else 0.0)
        partial = np.zeros(len(e), dtype=np.int64)
        ok = under_way & (e > start)
        if ok.any():
            n_scf = self.scf_steps[lo + d[ok]].astype(np.int64)
            frac = (e[ok] - start[ok]) / (ends[d[ok]] - start[ok])
            partial[ok] = np.minimum(n_scf - 1, np.floor(frac * n_scf).astype(np.int64))
        return done.astype(np.int64), partial

    def moves(self, i: int, elapsed: np.ndarray) -> list[float]:
        """Those of ``elapsed`` (rising) at which job ``i``'s progress differs from the one before."""
        if not len(elapsed):
            return []
        e = np.asarray(elapsed, dtype=np.float64)
        done, partial = self._observe(i, e)
        keep = (done > 0) | (partial > 0)
        keep[1:] &= (done[1:] != done[:-1]) | (partial[1:] != partial[:-1])
        return e[keep].tolist()

    def batch(self, rows: list[int], elapsed: list[float]) -> dict[str, Any]:
        """The progress arrays of jobs ``rows`` seen ``elapsed`` seconds into their runs."""
        n = len(rows)
        e = np.asarray(elapsed, dtype=np.float64)
        k = np.zeros(n, dtype=np.int64)
        scf = np.zeros(n, dtype=np.int64)
        rows_a = np.asarray(rows, dtype=np.int64)
        # one search per job, over all of its elapsed times
        order = np.argsort(rows_a, kind="stable")
        bounds = np.flatnonzero(np.diff(rows_a[order])) + 1
        for group in np.split(order, bounds) if n else []:
            d, p = self._observe(int(rows_a[group[0]]), e[group])
            k[group], scf[group] = d, p
        starts = self.offsets[rows_a] if n else np.zeros(0, dtype=np.int64)
        # only the rows these jobs have done, each job's once: the model's sums run over them
        uniq, inv = np.unique(rows_a, return_inverse=True)
        longest = np.zeros(len(uniq), dtype=np.int64)
        np.maximum.at(longest, inv, k)
        first = np.cumsum(longest) - longest
        total = int(longest.sum())
        take = np.repeat(self.offsets[uniq] - first, longest) + np.arange(total)
        values = self.values[take]
        if self.scf_offsets is not None and n:
            trace_len = scf
            trace_starts = np.where(scf > 0, self.scf_offsets[np.minimum(
                starts + k, len(self.scf_offsets) - 1)], 0)
            trace = self.scf_de
        else:
            trace_len = np.zeros(n, dtype=np.int64)
            trace_starts = np.zeros(n, dtype=np.int64)
            trace = np.zeros(0)
        startup = np.where((k > 0) | (scf > 0), self.startup[rows_a] if n else 0.0, np.nan)
        startup = np.where(np.isfinite(startup), startup, np.nan)
        return {"values": values, "starts": first[inv], "k": k, "elapsed": e, "scf_done": scf,
                "trace": trace, "trace_starts": trace_starts, "trace_len": trace_len,
                "startup": startup}
