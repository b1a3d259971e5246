"""Slurm's classic fair-share factor from the usage the simulation itself produces.

Slurm's classic algorithm (https://slurm.schedmd.com/classic_fair_share.html;
Slurm selects it with ``PriorityFlags=NO_FAIR_TREE``)::

    F = 2 ** (-UE / S)

``S`` is the association's normalised share: its share among its siblings
times its account's share among the accounts, from the raw shares
(sacctmgr's ``Fairshare=``; ``shares`` in a scenario's ``scheduler.slurm``)
and 1 for every association they do not name (equal shares), every user of
the workload and every account it names counted from the start.
``UE`` is its effective usage: an account's is its normalised usage (its
decayed usage over the cluster's), a user's in an account ``UA + (UE_account
- UA) * S_user / S_siblings``. Without an ``account`` feature column every
user sits under the root, so ``UE = UA`` and ``S = 1 / users``.

Usage is core-seconds (units of the machine times seconds) decayed with
half-life ``H`` (``PriorityDecayHalfLife``): a job that ran ``p`` units over
``[a, b)`` adds ``p * integral_a^b 2^-((t - s) / H) ds`` at time ``t``. Usage
is linear in the jobs, so it is kept as one accumulator per association,
decayed exactly to each moment it is read, plus the running jobs' part
computed then in closed form (Slurm decays at every ``PriorityCalcPeriod``,
5 minutes by default; here decay is continuous and exact). With a reset
period (``PriorityUsageResetPeriod``) usage before the last boundary is
dropped. A job's usage is added when its end is seen at a pass (at its end
time; an attempt that was killed and requeued, whose end time the job does
not keep, at the moment it is seen).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from cosim.errors import ScenarioError

__all__ = ["FairShare"]


def _set_share(name: str, share: float, user_of: np.ndarray, acct_labels: np.ndarray,
               user_raw: np.ndarray, acct_raw: np.ndarray) -> None:
    """Give the account or user ``name`` (``account:X``, ``user:X`` or a bare X)
    its raw share; a name the workload lacks, or a bare one that is both, is refused."""
    kind, sep, label = name.partition(":")
    if not sep or kind not in ("account", "user"):
        kind, label = "", name
    is_acct = acct_labels == label if kind in ("", "account") else np.zeros(0, bool)
    is_user = user_of == label if kind in ("", "user") else np.zeros(0, bool)
    where = f"scheduler.slurm: shares: {name}"
    if is_acct.any() and is_user.any():
        raise ScenarioError(where, "a name that is both an account and a user",
                            f"account:{label} or user:{label}")
    if is_acct.any():
        acct_raw[is_acct] = share
    elif is_user.any():
        user_raw[is_user] = share
    else:
        known = sorted(set(acct_labels.tolist()))[:5] + sorted(set(user_of.tolist()))[:5]
        raise ScenarioError(where, "a name no account or user of the workload has",
                            "an account (the workload's account column) or a user id, "
                            f"such as {', '.join(known)}")


class FairShare:
    """Per-association decayed usage and the classic fair-share factor.

    Args:
        users: user id per workload row (-1: unknown, one association of its own).
        accounts: account label per row, or None (every user under the root).
        half_life: seconds (0: no decay).
        reset_period: seconds between usage resets (0: never).
    """

    def __init__(self, users, accounts, half_life: float, reset_period: float,
                 shares: Mapping[str, float] | None = None):
        users = np.asarray(users)
        if accounts is None:
            keys = users.astype(str)
            user_of, assoc = np.unique(keys, return_inverse=True)
            acct_of = np.zeros(int(assoc.max()) + 1 if len(assoc) else 0, dtype=np.int64)
            acct_labels = np.array([], dtype=str)
        else:
            accounts = np.asarray(accounts).astype(str)
            pairs = np.char.add(np.char.add(accounts, "\x1f"), users.astype(str))
            uniq, assoc = np.unique(pairs, return_inverse=True)
            split = [p.split("\x1f", 1) for p in uniq.tolist()]
            user_of = np.array([u for _, u in split], dtype=str)
            acct_labels, acct_of = np.unique(np.array([a for a, _ in split], dtype=str),
                                             return_inverse=True)
        self.assoc_of_row = assoc.astype(np.int64)
        self.acct_of = acct_of.astype(np.int64)
        n = len(self.acct_of)
        n_acct = int(self.acct_of.max()) + 1 if n else 0
        self.n_acct = n_acct
        user_raw, acct_raw = np.ones(n), np.ones(n_acct)
        for name, share in (shares or {}).items():
            _set_share(str(name), float(share), user_of, acct_labels, user_raw, acct_raw)
        siblings = np.bincount(self.acct_of, user_raw, minlength=n_acct)
        self.sibling_share = user_raw / siblings[self.acct_of] if n else np.empty(0)
        # S = (the user's share among its account's users) * (the account's among accounts)
        self.share = self.sibling_share * (acct_raw / acct_raw.sum())[self.acct_of] if n \
            else np.empty(0)
        self.two_levels = accounts is not None
        self.rate = math.log(2.0) / half_life if half_life > 0 else 0.0
        self.reset = float(reset_period)
        self.done = np.zeros(n)          # completed usage, as of self.when
        self.when = 0.0
        self._running: dict = {}         # job -> (start, units, association) seen running

    def _epoch(self, t: float) -> float:
        """The last reset boundary at or before ``t`` (-inf without resets)."""
        return math.floor(t / self.reset) * self.reset if self.reset > 0 else -math.inf

    def _part(self, units, a, b, t):
        """Usage at ``t`` of ``units`` run over ``[a, b)`` (arrays or floats)."""
        if self.rate == 0.0:
            return units * (b - a)
        r = self.rate
        return units * (np.exp(-r * (t - b)) - np.exp(-r * (t - a))) / r

    def _advance(self, t: float) -> None:
        if t <= self.when:
            return
        if self._epoch(t) > self.when:
            self.done[:] = 0.0
        elif self.rate:
            self.done *= math.exp(-self.rate * (t - self.when))
        self.when = t

    def observe(self, running_jobs, now: float, started=()) -> None:
        """Account what changed since the last call: ``started`` (jobs started
        since, some perhaps ended already) join; jobs no longer among
        ``running_jobs`` (the jobs running now) add their usage."""
        self._advance(now)
        seen = self._running
        n_rows = len(self.assoc_of_row)
        for job in started:
            if job not in seen and 0 <= job.index < n_rows:
                seen[job] = (job.start, float(job.procs), int(self.assoc_of_row[job.index]))
        current = set(running_jobs)
        epoch = self._epoch(now)
        for job, (start, units, assoc) in list(seen.items()):
            if job in current and job.start == start:
                continue
            end = job.end if (job.end == job.end and job.end >= start) else now
            a = max(start, epoch)
            end = min(end, now)
            if end > a:
                self.done[assoc] += self._part(units, a, end, now)
            del seen[job]
        for job in current:
            if job not in seen and 0 <= job.index < n_rows:
                seen[job] = (job.start, float(job.procs), int(self.assoc_of_row[job.index]))

    def usage(self, now: float) -> np.ndarray:
        """Decayed usage per association at ``now`` (completed plus running)."""
        self._advance(now)
        out = self.done.copy()
        if self._running:
            vals = list(self._running.values())
            start = np.fromiter((v[0] for v in vals), np.float64, len(vals))
            units = np.fromiter((v[1] for v in vals), np.float64, len(vals))
            assoc = np.fromiter((v[2] for v in vals), np.int64, len(vals))
            start = np.maximum(start, self._epoch(now))
            part = self._part(units, start, np.maximum(start, now), now)
            out += np.bincount(assoc, part, minlength=len(out))
        return out

    def factor(self, now: float) -> np.ndarray:
        """The classic fair-share factor per association, in (0, 1]."""
        used = self.usage(now)
        total = used.sum()
        if total <= 0:
            return np.ones(len(used))
        ua = used / total
        if self.two_levels:
            ue_acct = np.bincount(self.acct_of, ua, minlength=self.n_acct)
            ue = ua + (ue_acct[self.acct_of] - ua) * self.sibling_share
        else:
            ue = ua
        return np.exp2(-ue / self.share)

    def factor_of_rows(self, rows: np.ndarray, now: float) -> np.ndarray:
        """The factor of the associations of workload rows ``rows`` (1 outside the workload)."""
        f = self.factor(now)
        ok = (rows >= 0) & (rows < len(self.assoc_of_row))
        out = np.ones(len(rows))
        out[ok] = f[self.assoc_of_row[rows[ok]]]
        return out
