"""A parametric priority: ``key = weights . features``, smaller runs first, with backfilling.

The features of a queued job (estimate ``e`` in seconds, cores ``p``,
wait so far ``w``, submit time ``s``, machine capacity ``N``)::

    0 log_est        log10(max(e, 1))
    1 log_procs      log10(p)
    2 log_wait       log10(w + 1)                  (changes with time)
    3 log_est_procs  log10(max(e, 1)) * log10(p)
    4 wait_per_est   w / max(e, 1)                 (changes with time)
    5 log_submit     log10(max(s, 1))
    6 f1_area        log10(max(e, 1)) * p / N
    7 log_user_pred  log10(max(u, 1)), u the user-history prediction below
    8 log_user_accuracy  log10 of the user's recent run/request ratio (0: none known)
    9 backlog_log_est    B * log_est     (B below; changes with the queue)
   10 backlog_log_procs  B * log_procs
   11 backlog_log_wait   B * log_wait

``B = log10(1 + Q / N)``, ``Q`` the queued jobs' estimated work in
core-hours: the hours the machine would need to clear its queue. The three
products let one policy order the queue differently under a backlog than on
a quiet machine (the best heuristic changes from span to span of a trace,
and a backlog is what tells the spans apart while they run); with ``B``
the same for every job of a pass, the key is ``(w + B v) . features``.

The two user features follow Tsafrir, Etsion and Feitelson ("Backfilling
using system-generated predictions rather than user runtime estimates",
IEEE TPDS 2007): a job's run time is predicted as the mean run time of the
same user's last two jobs that had completed before it was submitted,
capped by its requested time. :func:`user_history` computes them once per
workload, vectorized, from the trace as recorded (a job completed at
``submit + recorded wait + run``; where the trace records no wait, at
``submit + run``, as if it had not waited) and never from the job itself or
later jobs. Users unknown (-1) or without a completed job fall back to the
requested time (accuracy 1). They only order the queue: EASY's reservation
and the kill limit still use the estimate.

Classic orders are points of this space (:func:`heuristic_weights`): SJF is
``log_est``, SAF ``log_est + log_procs`` (the log of the area), FCFS
``log_submit``, F1 (Carastan-Santos and de Camargo, SC'17) exactly
``f1_area + (870 / N) log_submit`` (its published key divided by N), and
WFP3 and UNICEF approximately (in logs). Keys only order jobs, so weights
that differ by a positive factor are the same policy.

A :class:`PriorityWeights` is plain data (a tuple of floats and a backfilling
name): it pickles to worker processes and saves as JSON. Without time-dependent
weights (``log_wait``, ``wait_per_est``) the key is static, computed once per
job, and EASY keeps its incremental arrival passes; otherwise it is
recomputed, vectorized, at every pass. Either way the policy is the existing
:class:`cosim.policies.backfill.QueuePolicy` around a
:class:`cosim.policies.heuristics.Heuristic`.

A second weight vector over the same features, ``backfill_weights``, orders
EASY's backfill candidates on its own (the head and its reservation still
follow ``weights``): "who backfills first" is a choice the classic heuristics
tie to their queue order, and the search may untie it. Such a policy
recomputes both keys at every pass (:class:`TwoOrderEasy`).

``promote_after`` is a starvation guard: a job that has waited that many
seconds goes ahead of every job that has not, the promoted jobs oldest
first (0: off). Linear aging (``log_wait``, ``wait_per_est``) moves every
job's key; measured over running spans it bought the max wait back only at
3.8-4.1x SAF+EASY's mean bsld, since it reorders the many short waits too.
The guard leaves the order alone until a job has waited that long, as a
production scheduler's queue-time limit does.

``slack`` relaxes EASY (:class:`cosim.policies.backfill.QueuePolicy`): the head
is promised its shadow time plus ``slack`` times its estimate, and backfilling
may use that room (0: textbook EASY). ``drain_factor`` and ``drain_grace`` make
EASY drain-aware (``QueuePolicy``'s ``drain``; 0: off).

A tuned policy folder (``python -m agents tune``) holds ``policy.json``:
``{"kind": "priority", "weights": [...], "features": [...], "backfill": "easy"}``
(plus ``"backfill_weights": [...]`` when the backfill order was searched and
``"slack": s`` when EASY is relaxed, ``"promote_after": t`` when the guard is on,
``"drain_factor": D, "drain_grace": G`` when EASY is drain-aware)
or, when a classic heuristic won on validation, ``{"kind": "heuristic",
"name": "saf+easy"}``, or, from ``--space slurm``, ``{"kind": "slurm", "name":
"slurm:KEY=VALUE,..."}``. :func:`load_learned` reads it; ``learned:DIR`` in the
policy-name grammar runs it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cosim.errors import InputError
from cosim.limits import MAX_PRIORITY_WEIGHT, MAX_RELAXED_SLACK, read_json
from cosim.policies.backfill import BACKFILLS, QueuePolicy, easy_admits
from cosim.policies.heuristics import HEURISTICS, Heuristic
from cosim.policies.slurm import make_slurm_policy

__all__ = ["FEATURES", "PriorityWeights", "TwoOrderEasy", "heuristic_weights",
           "make_priority_policy", "load_learned", "learned_beliefs", "POLICY_FILE", "USER_FEATURES", "BACKLOG_FEATURES",
           "user_history", "user_history_applies"]

#: Feature names, in weight order.
FEATURES = ("log_est", "log_procs", "log_wait", "log_est_procs", "wait_per_est", "log_submit",
            "f1_area", "log_user_pred", "log_user_accuracy", "backlog_log_est",
            "backlog_log_procs", "backlog_log_wait")
#: The user-history features (computed per workload by :func:`user_history`).
USER_FEATURES = ("log_user_pred", "log_user_accuracy")
#: The backlog features (see the module docstring).
BACKLOG_FEATURES = ("backlog_log_est", "backlog_log_procs", "backlog_log_wait")
_DYNAMIC = (2, 4, 9, 10, 11)          # features that change while a job waits
_USER = (7, 8)
#: Feature lists of earlier versions, read by :func:`load_learned` (missing weights are 0).
_OLD_FEATURES = (FEATURES[:7], FEATURES[:9])
#: The file in a tuned policy folder.
POLICY_FILE = "policy.json"


@dataclass(frozen=True)
class PriorityWeights:
    """One priority policy: weights over :data:`FEATURES` and a backfilling variant.

    Attributes:
        weights: one float per feature.
        capacity: the machine's schedulable units N (``f1_area``'s scale).
        backfill: ``none``, ``greedy``, ``easy`` or ``conservative``.
        name: shown in results (``priority`` by default).
        backfill_weights: EASY only: one float per feature ordering the
            backfill candidates (smaller first); None backfills in the
            ``weights`` order.
        slack: EASY only: relaxed EASY, the head promised its shadow time plus
            ``slack`` times its estimate (0: textbook EASY; see
            :meth:`cosim.policies.backfill.QueuePolicy._relaxed`).
        promote_after: the starvation guard: seconds of wait after which a job
            goes ahead of every job that has waited less, oldest first (0: off).
        drain_factor, drain_grace: EASY only: no reservation for a head whose
            shadow time is more than ``drain_factor`` times its estimate away
            until it has waited ``drain_grace`` seconds (0: off).
    """

    weights: tuple[float, ...]
    capacity: int
    backfill: str = "easy"
    name: str = "priority"
    backfill_weights: tuple[float, ...] | None = None
    slack: float = 0.0
    promote_after: float = 0.0
    drain_factor: float = 0.0
    drain_grace: float = 0.0

    def __post_init__(self):
        if isinstance(self.capacity, bool) or not self.capacity >= 1:
            raise ValueError(f"capacity: {self.capacity!r}; expected a whole number of "
                             "schedulable units >= 1")
        if len(self.weights) != len(FEATURES):
            raise ValueError(f"weights: {len(self.weights)} values, expected {len(FEATURES)} "
                             f"({', '.join(FEATURES)})")
        if not all(abs(w) <= MAX_PRIORITY_WEIGHT for w in self.weights):
            raise ValueError(f"weights: {list(self.weights)} has a value that is not finite "
                             f"or past +-{MAX_PRIORITY_WEIGHT:g} (keys only order jobs: "
                             "scale the weights down)")
        if self.backfill not in BACKFILLS:
            raise ValueError(f"backfill: {self.backfill!r}, expected one of {', '.join(BACKFILLS)}")
        if not (0.0 <= self.slack <= MAX_RELAXED_SLACK) or (
                self.slack and self.backfill != "easy"):
            raise ValueError(f"slack: {self.slack!r}; expected a number from 0 to "
                             f"{MAX_RELAXED_SLACK:g}, and only with easy backfilling")
        if not (self.promote_after >= 0.0 and math.isfinite(self.promote_after)):
            raise ValueError(f"promote_after: {self.promote_after!r}; expected a finite number "
                             "of seconds >= 0 (0: off)")
        drain = (self.drain_factor, self.drain_grace)
        if not all(x >= 0.0 and math.isfinite(x) for x in drain) or (
                self.drain_factor and self.backfill != "easy"):
            raise ValueError(f"drain_factor, drain_grace: {drain}; expected finite numbers "
                             ">= 0 (0: off), and only with easy backfilling")
        bw = self.backfill_weights
        if bw is not None:
            if self.backfill != "easy":
                raise ValueError(f"backfill_weights: only with easy backfilling, not "
                                 f"{self.backfill!r}")
            if len(bw) != len(FEATURES) or not all(abs(w) <= MAX_PRIORITY_WEIGHT for w in bw):
                raise ValueError(f"backfill_weights: {list(bw)}; expected {len(FEATURES)} "
                                 f"values within +-{MAX_PRIORITY_WEIGHT:g}")

    @property
    def dynamic(self) -> bool:
        """Whether keys are recomputed every pass: a time-dependent feature has a
        weight, or the backfill order is its own."""
        return (self.backfill_weights is not None or self.promote_after > 0.0
                or any(self.weights[i] != 0.0 for i in _DYNAMIC))

    @property
    def uses_user_features(self) -> bool:
        """Whether a user-history feature has a weight (in either vector)."""
        vecs = [self.weights] + ([self.backfill_weights] if self.backfill_weights else [])
        return any(v[i] != 0.0 for v in vecs for i in _USER)

    def as_dict(self) -> dict:
        """The JSON form of ``policy.json``."""
        d = {"kind": "priority", "features": list(FEATURES),
             "weights": [float(w) for w in self.weights], "capacity": int(self.capacity),
             "backfill": self.backfill}
        if self.backfill_weights is not None:
            d["backfill_weights"] = [float(w) for w in self.backfill_weights]
        if self.slack:
            d["slack"] = float(self.slack)
        if self.promote_after:
            d["promote_after"] = float(self.promote_after)
        if self.drain_factor:
            d["drain_factor"] = float(self.drain_factor)
            d["drain_grace"] = float(self.drain_grace)
        return d


def heuristic_weights(name: str, capacity: int) -> tuple[float, ...] | None:
    """The weights of a classic order in this space (None when it has none).

    Exact (the same order) for ``sjf``, ``saf``, ``fcfs`` (for submit times
    of at least 1 s) and ``f1``; in logs for ``wfp3`` (``-(3 log wait - 3 log
    est + log procs)``) and ``unicef`` (``-(log wait - log est)``).
    """
    w = dict.fromkeys(FEATURES, 0.0)
    if name == "sjf":
        w["log_est"] = 1.0
    elif name == "saf":
        w["log_est"] = w["log_procs"] = 1.0
    elif name == "fcfs":
        w["log_submit"] = 1.0
    elif name == "f1":
        w["f1_area"], w["log_submit"] = 1.0, 870.0 / capacity
    elif name == "wfp3":
        w["log_wait"], w["log_est"], w["log_procs"] = -3.0, 3.0, -1.0
    elif name == "unicef":
        w["log_wait"], w["log_est"] = -1.0, 1.0
    else:
        return None
    return tuple(w[f] for f in FEATURES)


def user_history(workload) -> dict[str, np.ndarray]:
    """Per row of ``workload``: ``log_user_pred`` and ``log_user_accuracy`` (see the module
    docstring), from the same user's jobs completed strictly before the row's submit time.

    A job "completed" at ``submit + wait + run`` with ``features["wait"]`` where the
    workload records it (finite, >= 0), else at ``submit + run``. The last two such
    jobs by completion time give the prediction (their mean run time, capped by the
    row's requested time; one job: its run time) and the accuracy (the mean of their
    ``min(run / max(request, 1), 1)``). Computed with sorts and binary searches, no loop
    over jobs.
    """
    submit = np.asarray(workload.submit, dtype=np.float64)
    run = np.asarray(workload.run, dtype=np.float64)
    req = np.asarray(workload.req_time, dtype=np.float64)
    user = np.asarray(workload.user, dtype=np.int64)
    n = len(submit)
    wait = workload.features.get("wait")
    end = submit + run
    if wait is not None:
        wait = np.asarray(wait, dtype=np.float64)
        known = np.isfinite(wait) & (wait >= 0)
        end = end + np.where(known, wait, 0.0)
    pred = req.copy()
    acc = np.ones(n)
    known_user = user >= 0
    if n and known_user.any():
        # Exact comparisons on one integer key: (user, time rank). Ranks over ends and
        # submits together keep ties (an end equal to a submit does not count: strict).
        _, ranks = np.unique(np.concatenate([end, submit]), return_inverse=True)
        r_end, r_sub = ranks[:n].astype(np.int64), ranks[n:].astype(np.int64)
        _, uid = np.unique(user, return_inverse=True)
        uid = uid.astype(np.int64)
        scale = int(ranks.max()) + 1
        done = np.flatnonzero(known_user)
        done = done[np.lexsort((r_end[done], uid[done]))]      # by user, then completion
        done_key = uid[done] * scale + r_end[done]
        q = np.flatnonzero(known_user)
        last = np.searchsorted(done_key, uid[q] * scale + r_sub[q], side="left") - 1
        ratio = np.minimum(run / np.maximum(req, 1.0), 1.0)
        have1 = last >= 0
        have1[have1] = uid[done[last[have1]]] == uid[q[have1]]
        have2 = have1 & (last >= 1)
        have2[have2] = uid[done[last[have2] - 1]] == uid[q[have2]]
        a = done[np.where(have1, last, 0)]
        b = done[np.where(have2, last - 1, 0)]
        mean_run = np.where(have2, 0.5 * (run[a] + run[b]), run[a])
        mean_ratio = np.where(have2, 0.5 * (ratio[a] + ratio[b]), ratio[a])
        pred[q] = np.where(have1, np.minimum(mean_run, req[q]), req[q])
        acc[q] = np.where(have1, mean_ratio, 1.0)
    return {"log_user_pred": np.log10(np.maximum(pred, 1.0)),
            "log_user_accuracy": np.log10(np.maximum(acc, 1e-3))}


def user_history_applies(workload) -> tuple[bool, str]:
    """Whether the user-history features can tell the scheduler more than the requests.

    Yes when at least half the jobs name their user and at least half request
    more than 1.25x their run time: a user's recent run times then predict
    better than the request (Tsafrir, Etsion and Feitelson 2007). No on
    generated workloads without users and where requests are the run times.
    Returns the answer and the two fractions, in words.
    """
    n = len(workload)
    if not n:
        return False, "no jobs"
    known = float(np.mean(np.asarray(workload.user) >= 0))
    run = np.maximum(np.asarray(workload.run, dtype=np.float64), 1.0)
    over = float(np.mean(np.asarray(workload.req_time, dtype=np.float64) > 1.25 * run))
    why = (f"{known:.0%} of jobs name their user, {over:.0%} request more than 1.25x "
           "their run time")
    return known >= 0.5 and over >= 0.5, why


class _UserColumns:
    """The user features of the workload a policy runs on, bound by ``attach_model``.

    Before binding (or for a job outside the bound workload) a job gets the
    fallback: its estimate as prediction, accuracy 1.
    """

    def __init__(self):
        self.pred: list[float] | None = None
        self.acc: list[float] | None = None
        self._pred_np = self._acc_np = None
        self._jobs = None                            # the queue's job list the cache is of
        self._rows = np.empty(0, dtype=np.int64)     # workload row per queue slot
        self._filled = 0

    def bind(self, workload) -> None:
        """Use ``workload.features`` columns when present (computed on a longer
        history, as ``agents tune`` does), else compute them on ``workload``."""
        f = workload.features
        cols = ({k: np.asarray(f[k], dtype=np.float64) for k in USER_FEATURES}
                if all(k in f for k in USER_FEATURES) else user_history(workload))
        self._pred_np, self._acc_np = cols["log_user_pred"], cols["log_user_accuracy"]
        self.pred, self.acc = self._pred_np.tolist(), self._acc_np.tolist()

    def of_job(self, job) -> tuple[float, float]:
        """(log_user_pred, log_user_accuracy) of one job."""
        i = job.index
        if self.pred is not None and 0 <= i < len(self.pred):
            return self.pred[i], self.acc[i]
        return math.log10(max(job.estimate, 1.0)), 0.0

    def of_slots(self, q, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The two columns for queue slots ``slots``.

        The workload row of each slot is cached: the queue's job list only grows
        until it is replaced (compaction or reset), so each job is looked up once.
        """
        if self._pred_np is None:
            return np.log10(np.maximum(q.estimate[slots], 1.0)), np.zeros(len(slots))
        jobs = q.jobs
        if jobs is not self._jobs:
            self._jobs, self._filled = jobs, 0
        n = len(jobs)
        if n > self._filled:
            if n > len(self._rows):
                grown = np.empty(max(2 * n, 256), dtype=np.int64)
                grown[:self._filled] = self._rows[:self._filled]
                self._rows = grown
            self._rows[self._filled:n] = [-1 if j is None else j.index
                                          for j in jobs[self._filled:n]]
            self._filled = n
        idx = self._rows[slots]
        if len(idx) and (idx.min() < 0 or idx.max() >= len(self._pred_np)):
            return np.log10(np.maximum(q.estimate[slots], 1.0)), np.zeros(len(slots))
        return self._pred_np[idx], self._acc_np[idx]


def _static_key(weights: tuple[float, ...], capacity: int, users: _UserColumns | None = None):
    users = users or _UserColumns()
    w0, w1, w3, w5, w6, w7, w8 = (weights[i] for i in (0, 1, 3, 5, 6, 7, 8))
    of_job = users.of_job

    def key(job) -> float:
        le = math.log10(max(job.estimate, 1.0))
        lp = math.log10(max(job.procs, 1))
        k = (w0 * le + w1 * lp + w3 * le * lp + w5 * math.log10(max(job.submit, 1.0))
             + w6 * le * job.procs / capacity)
        if w7 or w8:
            up, ua = of_job(job)
            k += w7 * up + w8 * ua
        return k
    return key


#: Promoted jobs' keys sit this far below any weighted key (weights are unit-norm or
#: near it and features are logs, so real keys are within a few hundred of 0), and
#: their submit times (below 1e9 s) order them oldest first.
_PROMOTED = -1e12


def _uncached_key(w: np.ndarray, capacity: int, users: _UserColumns, promote_after: float):
    """The dynamic key computed from the queue's columns alone (every term, every pass)."""
    def key(q, slots, now, cluster, rng) -> np.ndarray:
        est = np.maximum(q.estimate[slots], 1.0)
        procs = q.procs[slots].astype(np.float64)
        wait = np.maximum(now - q.submit[slots], 0.0)
        le = np.log10(est)
        lp = np.log10(np.maximum(procs, 1.0))
        out = w[0] * le + w[1] * lp + w[3] * le * lp + w[6] * le * procs / capacity
        if w[5]:
            out = out + w[5] * np.log10(np.maximum(q.submit[slots], 1.0))
        if w[2]:
            out = out + w[2] * np.log10(wait + 1.0)
        if w[4]:
            out = out + w[4] * wait / est
        if w[7] or w[8]:
            up, ua = users.of_slots(q, slots)
            out = out + w[7] * up + w[8] * ua
        if w[9] or w[10] or w[11]:
            everyone = q.slots()      # the whole queue's backlog, whichever slots are keyed
            work = float(np.dot(q.estimate[everyone], q.procs[everyone])) / 3600.0
            b = math.log10(1.0 + work / capacity)
            out = out + b * (w[9] * le + w[10] * lp + w[11] * np.log10(wait + 1.0))
        if promote_after:
            out = np.where(wait >= promote_after, _PROMOTED + q.submit[slots], out)
        return out
    return key


class _WaitFreeTerms:
    """Per queue slot, the terms of a dynamic key that do not change while a job
    waits (estimate, size, submit time, user columns), computed once per job, so a
    pass adds only the wait terms: about half the numpy calls of a key on RICC.

    Valid while the queue keeps its job list (compaction and reset replace it), no
    estimate is set (:meth:`cosim.queue.JobQueue.set_estimate`) and the user
    columns stay bound; otherwise filled again. Sums are formed in the uncached
    key's order, so keys agree to the last bit (``tests/test_priority.py``).
    """

    def __init__(self, w: np.ndarray, capacity: int, users: _UserColumns):
        self.w, self.capacity, self.users = w, capacity, users
        self.jobs, self.stamp, self.filled = None, None, 0
        self.base = self.est = self.le = self.lp = self.p7 = self.p8 = np.empty(0)
        self.valid = np.empty(0, dtype=bool)

    def update(self, q) -> None:
        stamp = (q.estimates_set, id(self.users._pred_np))
        if q.jobs is not self.jobs or stamp != self.stamp:
            self.jobs, self.stamp, self.filled = q.jobs, stamp, 0
        n, lo = len(self.jobs), self.filled
        if n <= lo:
            return
        if n > len(self.base):
            size = max(2 * n, 256)
            for name in ("base", "est", "le", "lp", "p7", "p8", "valid"):
                old = getattr(self, name)
                grown = np.empty(size, dtype=old.dtype)
                grown[:lo] = old[:lo]
                setattr(self, name, grown)
        w, sl = self.w, slice(lo, n)
        est = np.maximum(q.estimate[sl], 1.0)
        procs = q.procs[sl].astype(np.float64)
        le = np.log10(est)
        lp = np.log10(np.maximum(procs, 1.0))
        base = w[0] * le + w[1] * lp + w[3] * le * lp + w[6] * le * procs / self.capacity
        if w[5]:
            base = base + w[5] * np.log10(np.maximum(q.submit[sl], 1.0))
        self.base[sl], self.est[sl], self.le[sl], self.lp[sl] = base, est, le, lp
        pred, acc = self.users._pred_np, self.users._acc_np
        if pred is None:
            up, ua, ok = le, np.zeros(n - lo), True
        else:
            rows = np.array([-1 if j is None else j.index for j in self.jobs[sl]],
                            dtype=np.int64)
            ok = (rows >= 0) & (rows < len(pred))
            safe = np.where(ok, rows, 0)
            up, ua = pred[safe], acc[safe]
        self.p7[sl], self.p8[sl], self.valid[sl] = w[7] * up, w[8] * ua, ok
        self.filled = n


def _dynamic_key(weights: tuple[float, ...], capacity: int, users: _UserColumns | None = None,
                 promote_after: float = 0.0):
    users = users or _UserColumns()
    w = np.asarray(weights, dtype=np.float64)
    uncached = _uncached_key(w, capacity, users, promote_after)
    terms = _WaitFreeTerms(w, capacity, users)
    user_terms, backlog = bool(w[7] or w[8]), bool(w[9] or w[10] or w[11])

    def key(q, slots, now, cluster, rng) -> np.ndarray:
        terms.update(q)
        if user_terms and not terms.valid[slots].all():
            return uncached(q, slots, now, cluster, rng)   # a job outside the workload
        wait = np.maximum(now - q.submit[slots], 0.0)
        out = terms.base[slots]
        if w[2]:
            out = out + w[2] * np.log10(wait + 1.0)
        if w[4]:
            out = out + w[4] * wait / terms.est[slots]
        if user_terms:
            out = out + terms.p7[slots] + terms.p8[slots]
        if backlog:
            everyone = q.slots()      # the whole queue's backlog, whichever slots are keyed
            work = float(np.dot(q.estimate[everyone], q.procs[everyone])) / 3600.0
            b = math.log10(1.0 + work / capacity)
            out = out + b * (w[9] * terms.le[slots] + w[10] * terms.lp[slots]
                             + w[11] * np.log10(wait + 1.0))
        if promote_after:
            out = np.where(wait >= promote_after, _PROMOTED + q.submit[slots], out)
        return out
    key.uncached = uncached
    return key


class TwoOrderEasy(QueuePolicy):
    """EASY with the head chosen by one key and the backfill candidates tried in another.

    The queue key (``heuristic``, dynamic) picks the head and its
    reservation exactly as in :class:`QueuePolicy`; the candidates EASY may
    backfill around it are then tried smallest ``backfill_key`` first
    (ties: queue order). Candidates are always listed one by one (never the
    queue-order scan), since that scan follows the queue key; for the same
    reason a pass never narrows to the jobs sized between the last pass's free
    units and now (:attr:`QueuePolicy.narrow_passes`) nor to the jobs that just
    arrived (:attr:`QueuePolicy.arrival_passes`): both list them in queue order.
    """

    narrow_passes = False
    arrival_passes = False

    def __init__(self, heuristic: Heuristic, backfill_key, slack: float = 0.0,
                 drain: tuple[float, float] = (0.0, 0.0)):
        super().__init__(heuristic, "easy", slack=slack, drain=drain)
        self._bkey = backfill_key

    def _by_backfill_key(self, q, slots: np.ndarray, now: float, cl) -> np.ndarray:
        if len(slots) < 2:
            return slots
        return slots[np.argsort(self._bkey(q, slots, now, cl, self.rng), kind="stable")]

    def _easy_candidates_list(self, q, cl, now, shadow, extra, extra_mem, head):
        free, free_mem = cl.free, cl.free_mem
        jobs = [j for j in q.live_jobs() if j.procs <= free and j.mem <= free_mem
                and j is not head and easy_admits(j, now, shadow, extra, extra_mem)]
        if len(jobs) < 2:
            return jobs
        key = q.key   # queue order first, so ties in the backfill key keep it
        jobs.sort(key=lambda j: key[j.queue_slot])
        slots = np.array([j.queue_slot for j in jobs])
        return [q.jobs[s] for s in self._by_backfill_key(q, slots, now, cl).tolist()]

    def _easy_candidates_long(self, q, cl, now, shadow, extra, extra_mem):
        lo = q.lo
        rows = self._easy_mask(q, cl, now, shadow, extra, extra_mem, slice(lo, q.hi)).nonzero()[0]
        slots = rows + lo
        if len(slots) > 1:
            slots = slots[np.argsort(q.key[slots], kind="stable")]
        jobs = q.jobs
        return [jobs[s] for s in self._by_backfill_key(q, slots, now, cl).tolist()]


def make_priority_policy(spec: PriorityWeights) -> QueuePolicy:
    """The :class:`QueuePolicy` of ``spec`` (a static or dynamic key, then backfilling)."""
    weights = tuple(float(x) for x in spec.weights)
    doc = "learned priority: " + " ".join(f"{w:+.3g}*{f}" for w, f in zip(weights, FEATURES) if w)
    if spec.promote_after:
        doc += f"; a job waiting {spec.promote_after:.0f} s or more goes first, oldest first"
    drain = (spec.drain_factor, spec.drain_grace)
    if spec.drain_factor:
        doc += (f"; no reservation for a head more than {drain[0]:.3g}x its estimate from its "
                f"shadow time until it has waited {drain[1]:.0f} s")
    users = _UserColumns()
    if spec.dynamic:
        h = Heuristic(spec.name, doc, dynamic=_dynamic_key(weights, spec.capacity, users,
                                                           spec.promote_after))
    else:
        h = Heuristic(spec.name, doc, static=_static_key(weights, spec.capacity, users))
    if spec.backfill_weights is not None:
        bw = tuple(float(x) for x in spec.backfill_weights)
        policy = TwoOrderEasy(h, _dynamic_key(bw, spec.capacity, users), slack=spec.slack,
                              drain=drain)
    else:
        policy = QueuePolicy(h, spec.backfill, slack=spec.slack, drain=drain)
    policy.name = f"{spec.name}+{spec.backfill}"
    if spec.uses_user_features:
        # The model binds the policy to the workload it runs (cosim.model.build).
        policy.attach_model = lambda scheduler, workload: users.bind(workload)
    return policy


def learned_beliefs(folder: str | Path, *, where: str = "policy") -> tuple[str | None, str]:
    """``(predictor, correction)`` a tuned folder's ``policy.json`` plans with (``agents tune
    --beliefs``): ``(None, "")`` where it names none (requests, the scenario's correction) or
    there is no such file (:func:`load_learned` says so).

    Raises:
        InputError: a correction that is not one of ``scheduler.correction`` (the predictor
            is checked by :func:`cosim.policies.names.parse_policy`).
    """
    from typing import get_args

    from cosim.config import SchedulerConfig

    path = Path(folder) / POLICY_FILE
    if not path.is_file():
        return None, ""
    data = read_json(path, "a policy file written by 'python -m agents tune'")
    if not isinstance(data, dict):
        return None, ""
    predictor, correction = data.get("predictor"), data.get("correction", "")
    allowed = get_args(SchedulerConfig.model_fields["correction"].annotation)
    if correction and correction not in allowed:
        raise InputError(f"{path}: correction", repr(correction), f"one of {', '.join(allowed)}")
    return predictor, correction


def load_learned(folder: str | Path, *, where: str = "policy"):
    """The policy of a tuned folder's ``policy.json`` (see the module docstring).

    Raises:
        InputError: no such folder or file, or a file that does not say a
            priority or a heuristic policy; the message names the file.
    """
    path = Path(folder) / POLICY_FILE
    if not path.is_file():
        raise InputError(where, repr(f"learned:{folder}"),
                         f"learned:DIR with DIR a folder holding {POLICY_FILE} "
                         "(written by 'python -m agents tune')")
    data = read_json(path, "a policy file written by 'python -m agents tune'")
    if not isinstance(data, dict):
        raise InputError(str(path), type(data).__name__, "a JSON object")
    kind = data.get("kind")
    if kind == "heuristic":
        name = data.get("name")
        base, _, backfill = name.partition("+") if isinstance(name, str) else ("", "", "")
        if base not in HEURISTICS or backfill not in BACKFILLS:
            raise InputError(f"{path}: name", repr(name), "HEURISTIC+BACKFILL such as saf+easy")
        return QueuePolicy(HEURISTICS[base], backfill)
    if kind == "slurm":      # agents tune --space slurm: the slurm policy it names
        name = data.get("name")
        word, _, text = name.partition(":") if isinstance(name, str) else ("", "", "")
        if word != "slurm":
            raise InputError(f"{path}: name", repr(name), "a slurm policy name (slurm or "
                                                          "slurm:KEY=VALUE,...)")
        return make_slurm_policy(text, where=f"{path}: name")
    if kind != "priority":
        raise InputError(f"{path}: kind", repr(kind), "priority, heuristic or slurm")
    features = list(data.get("features") or [])
    if features != list(FEATURES) and all(features != list(old) for old in _OLD_FEATURES):
        raise InputError(f"{path}: features", repr(data.get("features")),
                         f"the features {list(FEATURES)} (this version's) or a prefix "
                         f"an earlier version wrote")
    pad = len(FEATURES) - len(features)     # an earlier version's file: new weights are 0

    def vec(values) -> tuple[float, ...]:
        out = tuple(float(x) for x in values)
        return out + (0.0,) * pad if len(out) == len(features) else out
    try:
        bw = data.get("backfill_weights")
        cap = data["capacity"]
        if (isinstance(cap, bool) or not isinstance(cap, (int, float))
                or not math.isfinite(cap) or cap != int(cap)):
            raise ValueError(f"capacity: {cap!r}; expected a whole number of schedulable "
                             "units >= 1")
        spec = PriorityWeights(vec(data["weights"]), int(cap),
                               str(data.get("backfill", "easy")), name=f"learned:{folder}",
                               backfill_weights=None if bw is None else vec(bw),
                               slack=float(data.get("slack", 0.0)),
                               promote_after=float(data.get("promote_after", 0.0)),
                               drain_factor=float(data.get("drain_factor", 0.0)),
                               drain_grace=float(data.get("drain_grace", 0.0)))
    except (KeyError, TypeError, ValueError) as exc:
        n = len(features)
        raise InputError(str(path), "a bad field", f"weights ({n} numbers), capacity, backfill, "
                         f"backfill_weights ({n} numbers, easy only), slack (>= 0, easy "
                         f"only), promote_after (seconds >= 0), drain_factor and "
                         f"drain_grace (>= 0, easy only): "
                         f"{exc}") from None
    return make_priority_policy(spec)
