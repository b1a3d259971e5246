"""The DeepRM workload of Mao et al. (2016): CPU + memory jobs, Bernoulli arrivals.

H. Mao, M. Alizadeh, I. Menache, S. Kandula, "Resource Management with Deep
Reinforcement Learning", HotNets 2016, section 5.1; also the Cunha thesis
(seed 003, section 2.3.1 and table 5.4) and A2cScheduler (seed 002), which use
the same generator. Published settings, all defaults here:

* a job arrives in each time step with probability ``job_rate`` (Bernoulli
  process; DeepRM's default rate is 0.7);
* 80 % of jobs are short, lasting U{1..3} time units; the other 20 % last
  U{10..15} units (discrete uniform);
* each job has a dominant resource, CPU or memory with equal probability; its
  demand of that resource is uniform in [0.25, 0.5] of the cluster capacity,
  and of the other resource in [0.05, 0.1].

Arrivals are drawn event by event: the gaps between Bernoulli successes are
geometric, so no loop over time steps is needed (the first job may arrive at
step 0). CPU demands are whole cores (a discrete uniform over the cores in the
range); memory demands are continuous GB.

Examples:
    >>> w = mao(100, seed=1)
    >>> len(w), bool(set(w.run.tolist()) <= {1, 2, 3, 10, 11, 12, 13, 14, 15})
    (100, True)
"""

from __future__ import annotations

import math

import numpy as np

from cosim.errors import WorkloadError
from cosim.workloads.base import Workload

__all__ = ["mao", "DEEPRM_JOB_RATE"]

#: DeepRM's default per-step arrival probability.
DEEPRM_JOB_RATE = 0.7


def _cpu_range(frac: tuple[float, float], cores: int) -> tuple[int, int]:
    """Whole-core demand bounds for a fraction range of the cluster."""
    lo = max(1, math.ceil(frac[0] * cores - 1e-9))
    hi = min(cores, math.floor(frac[1] * cores + 1e-9))
    if hi < lo:  # tiny clusters: the range holds no whole core; take the nearest
        lo = hi = min(cores, max(1, round(frac[0] * cores)))
    return lo, hi


def _check_range(where: str, value, low: float, high: float, integer: bool = False):
    ok = isinstance(value, tuple | list) and len(value) == 2
    if ok:
        a, b = value
        kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
        ok = (all(isinstance(v, kinds) and not isinstance(v, bool) for v in (a, b))
              and low <= a <= b <= high)
    if not ok:
        kind = "integers" if integer else "numbers"
        raise WorkloadError(where, repr(value), f"a pair (low, high) of {kind} with {low} <= low <= high <= {high}")
    return value


def _positive(where: str, value, *, integer: bool = False) -> None:
    if integer:
        good = isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 1
    else:
        good = (isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
                and math.isfinite(value) and value > 0)
    if not good:
        raise WorkloadError(where, repr(value), "a positive integer" if integer else "a positive finite number")


def mao(
    n_jobs: int,
    *,
    job_rate: float | None = None,
    load: float | None = None,
    seed: int = 0,
    time_unit: float = 1.0,
    cluster_cpu: int = 20,
    cluster_mem: float = 20.0,
    long_prob: float = 0.2,
    short_len: tuple[int, int] = (1, 3),
    long_len: tuple[int, int] = (10, 15),
    dominant: tuple[float, float] = (0.25, 0.5),
    other: tuple[float, float] = (0.05, 0.1),
) -> Workload:
    """Generate ``n_jobs`` DeepRM jobs.

    Args:
        n_jobs: number of jobs (>= 0).
        job_rate: probability that a job arrives in a time step, in (0, 1].
            Default 0.7 (DeepRM) unless ``load`` is given.
        load: instead of ``job_rate``, the expected CPU load to offer:
            ``job_rate * E[duration] * E[cpu demand] / cluster_cpu`` (0.92 at
            most with the default job mix, since at most one job arrives per
            step).
        seed: seed of the one ``numpy`` generator used.
        time_unit: seconds per time step; durations and submit times are
            multiples of it.
        cluster_cpu: cores of the cluster; ``procs`` holds whole-core demands.
        cluster_mem: memory of the cluster (GB); ``mem`` holds the demands.
        long_prob: share of long jobs (0.2 in DeepRM).
        short_len, long_len: inclusive duration ranges in time units.
        dominant, other: demand ranges, as fractions of the cluster capacity,
            of the dominant and of the other resource.

    Returns:
        Workload with ``req_time`` equal to the run time, ``max_procs =
        cluster_cpu``; ``source`` records the job rate used.

    Raises:
        WorkloadError: an argument is out of range (the message names it).
    """
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int | np.integer) or n_jobs < 0:
        raise WorkloadError("mao.n_jobs", repr(n_jobs), "an integer >= 0")
    _positive("mao.time_unit", time_unit)
    _positive("mao.cluster_cpu", cluster_cpu, integer=True)
    _positive("mao.cluster_mem", cluster_mem)
    if not (isinstance(long_prob, int | float) and 0 <= long_prob <= 1):
        raise WorkloadError("mao.long_prob", repr(long_prob), "a probability in [0, 1]")
    _check_range("mao.short_len", short_len, 1, math.inf, integer=True)
    _check_range("mao.long_len", long_len, 1, math.inf, integer=True)
    _check_range("mao.dominant", dominant, 0, 1)
    _check_range("mao.other", other, 0, 1)

    cpu_dom, cpu_oth = _cpu_range(dominant, cluster_cpu), _cpu_range(other, cluster_cpu)
    mean_len = (1 - long_prob) * sum(short_len) / 2 + long_prob * sum(long_len) / 2
    mean_cpu = (sum(cpu_dom) / 2 + sum(cpu_oth) / 2) / 2 / cluster_cpu
    load_per_rate = mean_len * mean_cpu

    if job_rate is not None and load is not None:
        raise WorkloadError("mao.load", f"load={load} with job_rate={job_rate}", "only one of load and job_rate")
    if load is not None:
        _positive("mao.load", load)
        if load > load_per_rate * (1 + 1e-12):
            raise WorkloadError("mao.load", repr(load),
                                f"at most {load_per_rate:.4g} (one job per step with this job mix)")
        job_rate = min(1.0, load / load_per_rate)
    elif job_rate is None:
        job_rate = DEEPRM_JOB_RATE
    if not (isinstance(job_rate, int | float) and 0 < job_rate <= 1):
        raise WorkloadError("mao.job_rate", repr(job_rate), "a probability in (0, 1]")

    rng = np.random.default_rng(seed)
    n = int(n_jobs)
    # Steps between Bernoulli successes are geometric (>= 1); the first job can
    # arrive in step 0, hence the -1.
    steps = np.cumsum(rng.geometric(job_rate, size=n)) - 1
    is_long = rng.random(n) < long_prob
    units = np.where(
        is_long,
        rng.integers(long_len[0], long_len[1], endpoint=True, size=n),
        rng.integers(short_len[0], short_len[1], endpoint=True, size=n),
    )
    cpu_dominant = rng.random(n) < 0.5
    cpu = np.where(
        cpu_dominant,
        rng.integers(cpu_dom[0], cpu_dom[1], endpoint=True, size=n),
        rng.integers(cpu_oth[0], cpu_oth[1], endpoint=True, size=n),
    )
    mem_frac = np.where(cpu_dominant, rng.uniform(other[0], other[1], size=n),
                        rng.uniform(dominant[0], dominant[1], size=n))
    run = units * float(time_unit)
    return Workload.from_columns(
        submit=steps * float(time_unit),
        run=run,
        procs=cpu,
        req_time=run,
        mem=mem_frac * cluster_mem,
        max_procs=int(cluster_cpu),
        source=f"mao(job_rate={job_rate:.6g}, seed={seed}, time_unit={time_unit})",
    )
