"""EASY's admission test and its two backfill scans, shared by the queue policies
(:mod:`cosim.policies.backfill`) and the action models that backfill around an
agent's choices (:mod:`cosim.env.actions`).

EASY (Lifka 1995; Mu'alem & Feitelson 2001): a job that fits now may start
ahead of the reserved head if it ends by the head's shadow time, or uses only
the units still free at that time once the head is placed.
"""

from __future__ import annotations

import math

import numpy as np

from cosim.decisions import START, Decision, start
from cosim.job import Job, Mode

__all__ = ["easy_admits", "easy_backfill_list", "easy_backfill_scan"]

_BACKFILLED = Mode.BACKFILLED
_NAN = math.nan
# ``_new(Decision, (START, job, mode, reason, NAN, True))`` builds a start decision
# without the NamedTuple constructor's Python frame (the hot path of EASY).
_new = tuple.__new__


def easy_admits(job: Job, now: float, shadow: float, extra: int, extra_mem: float) -> bool:
    """EASY's test: may ``job`` (which fits now) start ahead of the reserved head?

    Yes if it ends by the head's ``shadow`` time, or uses only the ``extra``
    units (and memory) still free at that time once the head is placed.
    """
    return now + job.estimate <= shadow or (job.procs <= extra and job.mem <= extra_mem)


def easy_backfill_list(candidates, cl, now: float, shadow: float, extra: int, extra_mem: float):
    """EASY backfilling from a short list of candidates in priority order.

    A generator of start decisions (each applied before the next is made);
    returns the extra units and memory left at the shadow time.
    """
    for job in candidates:
        if not cl.fits_now(job.procs, job.mem):
            continue
        if now + job.estimate <= shadow:
            yield start(job, Mode.BACKFILLED, "ends before shadow time")
        elif job.procs <= extra and job.mem <= extra_mem:
            extra -= job.procs
            extra_mem -= job.mem
            yield start(job, Mode.BACKFILLED, "uses extra cores")
        else:
            continue
        if cl.free == 0:
            break
    return extra, extra_mem

def easy_backfill_scan(q, cl, now: float, shadow: float, extra: int, extra_mem: float):
    """EASY backfilling over a long queue in key order: each start is found by one masked scan.

    A generator of start decisions; returns the extra units and memory left.

    The scan works on contiguous slices of the queue columns (no gathers),
    so a pass that finds nothing costs a handful of numpy calls.
    """
    lo, hi = q.lo, q.hi
    with_mem = cl.free_mem != np.inf
    while lo < hi:
        procs, est = q.procs[lo:hi], q.estimate[lo:hi]
        short = now + est <= shadow
        ok = (short | (procs <= extra)) if not with_mem else (
            short | ((procs <= extra) & (q.mem[lo:hi] <= extra_mem)))
        ok &= procs <= cl.free
        # dead slots hold DEAD_PROCS: the size test drops them
        if with_mem:
            ok &= q.mem[lo:hi] <= cl.free_mem
        if q.key_monotone:
            i = int(ok.argmax())
            if not ok[i]:
                break
        else:
            idx = ok.nonzero()[0]
            if not len(idx):
                break
            i = int(idx[q.key[lo:hi][idx].argmin()])
        job = q.jobs[lo + i]
        if short[i]:
            yield _new(Decision, (START, job, _BACKFILLED, "ends before shadow time", _NAN, True))
        else:
            extra -= job.procs
            extra_mem -= job.mem
            yield _new(Decision, (START, job, _BACKFILLED, "uses extra cores", _NAN, True))
        if cl.free == 0:
            break
        if q.key_monotone:
            # Jobs before it were refused and stay refused: resume after it.
            lo += i + 1
    return extra, extra_mem
