"""Prediction corrections: what the scheduler expects of a job that outlived its prediction.

The scheduler plans with a job's prediction (its priority, the head's shadow
time, what fits in a backfill hole) and kills it at its request (walltime
enforcement): the two are separate, as in EASY++ (Tsafrir, Etsion and
Feitelson, "Backfilling using system-generated predictions rather than user
runtime estimates", IEEE TPDS 18(6), 2007). A job still running at its
expected end was underpredicted; the scheduler then re-predicts it with the
scenario's named correction (``scheduler.correction``):

``overrun`` (the default)
    elapsed + max(``overrun_min_extension``, ``overrun_fraction`` x elapsed):
    60 s or a fifth of what it has run, whichever is more.
``stepup``
    EASY++'s correction: the prediction the job started with plus the next
    rung of a fixed ladder of increments (:data:`STEP_UP_LADDER`: 1, 5, 15,
    30 min, 1, 2, 5, 10, 20, 50, 100 h; past the last rung, 100 h more per
    correction). Each rung counts from the original prediction, so the
    k-th correction expects ``prediction + ladder[k]``.
``double``
    twice the elapsed time.
``request``
    the request at once.

Every correction is capped at the request: a job is never expected to run
past the time it will be killed at. Only a job that already outlived its
request (walltime not enforced, as in some trace replays) is corrected
beyond it: the request then bounds nothing, each correction applies uncapped
and ``request``, which has nothing more to say, falls back to ``overrun``.
Every correction counts as an overrun (``overruns`` in ``summary.json``); a
reservation it pushes back counts as broken (``reservations_broken``).
"""

from __future__ import annotations

import math

from cosim.job import Job

__all__ = ["CORRECTIONS", "STEP_UP_LADDER", "corrected_end"]

#: EASY++'s step-up increments (s): 1, 5, 15, 30 min, 1, 2, 5, 10, 20, 50, 100 h.
STEP_UP_LADDER: tuple[float, ...] = (60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 18000.0,
                                     36000.0, 72000.0, 180000.0, 360000.0)

#: The named corrections (``scheduler.correction``) and what each expects.
CORRECTIONS: dict[str, str] = {
    "overrun": "elapsed + max(60 s, 0.2 x elapsed), capped at the request",
    "stepup": "the prediction + the next of 1, 5, 15, 30 min, 1, 2, 5, 10, 20, 50, 100 h "
              "(EASY++), capped at the request",
    "double": "twice the elapsed time, capped at the request",
    "request": "the request at once",
}


def _rung(k: int) -> float:
    ladder = STEP_UP_LADDER
    return ladder[k] if k < len(ladder) else ladder[-1] * (k - len(ladder) + 2)


def corrected_end(name: str, job: Job, now: float, corrections: int, *,
                  min_extension: float = 60.0, fraction: float = 0.2) -> tuple[float, int]:
    """When ``job``, running past its expected end at ``now``, is expected to end instead.

    Args:
        name: a key of :data:`CORRECTIONS`.
        job: the running job; ``job.estimate`` is the prediction its attempt
            started with, ``job.req_time`` its request.
        now: the simulated time (after ``job.expected_end``).
        corrections: how many times this attempt was corrected before.
        min_extension, fraction: the ``overrun`` rule's parameters.

    Returns:
        The new expected end (always after ``now``) and the attempt's count
        of corrections after this one (``stepup`` may skip rungs that are
        already behind).

    Examples:
        >>> job = Job(1, 0, 0.0, 5000.0, 1, 3600.0, 100.0)
        >>> job.start = 0.0
        >>> corrected_end("stepup", job, 100.0, 0)    # 100 s predicted + 1 min
        (160.0, 1)
        >>> corrected_end("stepup", job, 160.0, 1)    # + 5 min
        (400.0, 2)
        >>> corrected_end("double", job, 2000.0, 2)   # 4000 s, capped at the request
        (3600.0, 3)
    """
    elapsed = now - job.start
    request = job.req_time
    # Whether the request's end is still ahead, compared as the end is computed
    # (start + request): ``elapsed < request`` can hold where start + request
    # rounds to ``now`` itself, and an expected end at ``now`` fires again at
    # ``now``, forever (a job of SDSC-SP2 that ran exactly its 18,000 s request).
    capped = job.start + request > now
    if name == "request" and not capped:
        name = "overrun"
    if name == "overrun":
        end = now + max(min_extension, fraction * elapsed)
        count = corrections + 1
    elif name == "stepup":
        k = corrections
        while job.estimate + _rung(k) <= elapsed:
            k += 1
        end = job.start + job.estimate + _rung(k)
        count = k + 1
    elif name == "double":
        end = job.start + 2.0 * elapsed if elapsed > 0 else now + min_extension
        count = corrections + 1
    elif name == "request":
        end = job.start + request
        count = corrections + 1
    else:
        raise ValueError(f"unknown correction {name!r}; one of {', '.join(CORRECTIONS)}")
    if capped and math.isfinite(request):
        end = min(end, job.start + request)
    # Always after now, also where a sum rounds down to it: time must move on.
    return max(end, math.nextafter(now, math.inf)), count
