"""Synthetic VASP jobs with input parameters and ionic-step trajectories.

RLSchert (seed 001) schedules VASP jobs from a centre whose data is not
public. This generator follows the model in ``VASP.md``:

* **Users and templates.** Each user owns a few project templates (a
  structure, an INCAR habit, a core count, a node group) and reuses them with
  small changes (ENCUT step, k-mesh, supercell, cores, EDIFF, ...), which is
  what gives user-history predictors their edge.
* **Job kinds.** Single point (NSW=0, IBRION=-1), relaxation (IBRION 1/2/3,
  force or energy criterion EDIFFG), molecular dynamics (IBRION=0, NSW steps)
  and finite-difference phonons (IBRION 5/6, ``1 + 6 N / symmetry``
  displacements). Defaults give RLSchert's 70 % single / 30 % multi-ionic.
* **Cost of one SCF step** (``VASP.md``): ``NPW = V (ENCUT/3.81)^1.5/(6 pi^2)``,
  ``W = Nk_irr n_spin NBANDS NPW ln(NPW) (1 + NBANDS/2000)``,
  ``t_scf = C W f_prec f_lreal f_xc / speedup(cores)`` with Amdahl's law and a
  serial fraction ``clip(0.25/atoms, 0.002, 0.05)`` (4-5 % for small systems,
  and one core per atom keeps efficiency near 80 %).
* **SCF steps per ionic step**: NELMDL non-self-consistent steps, then the
  energy error falls about 0.47 decades per step (first ionic step, from about
  1.5 eV) or 0.53 (later steps, from about 0.02 eV, more when forces are
  large) down to EDIFF; clipped to [NELMIN, NELM]; about 10 % of systems are
  hard and hit NELM.
* **Trajectories**: the maximum force decays geometrically (ratio 0.4-0.85,
  slow relaxations 0.88-0.96) from 0.13-2.9 eV/A to below ``|EDIFFG|``; the
  energy gap to the final energy decays with ratio 0.6-0.9; IBRION=2 has line
  searches whose trial steps go uphill and whose ``d E`` is measured from the
  start of the line search, as in real OSZICARs.
* **Noise a predictor cannot see**: per-user factor (lognormal sigma 0.10),
  per-node factor (each node lognormal sigma 0.05; a job runs at the pace of its
  slowest host), per-job noise (sigma 0.06: identical inputs stay within
  +-6-12 %), 2.1 % stragglers 3-6.7x slower, step-to-step jitter (CV 0.19),
  start-up and final I/O (median about 52 s together), +U on some templates.
  These are baked into the true run time: the engine does not model node
  speed, so the run time of a job is the same whichever nodes the scheduler
  gives it.

Run times are capped at ``runtime_cap`` (RLSchert limited its data set to
1000 min): a job whose drawn run time exceeds it is redrawn (kind kept; the
user is kept for the first rounds), as if the data set had been filtered.

Arrivals are a Poisson process with ``mean_interarrival``, or (``arrival=
"daily"``) a non-homogeneous Poisson process whose rate follows
``1 + a cos(2 pi (t - peak)/1 day)`` with the same mean. Requested walltimes
are round values (15 min, 30 min, 1, 2, 4, 6, 12, 24, 48 h) chosen as
``user margin x noisy guess of the run time`` rounded up, and some users
always ask for their maximum; a few per cent of jobs (mostly stragglers) run
past their request and will time out in an engine that enforces walltimes.

Trajectories are stored flat (CSR style): the rows of job ``j`` are
``offsets[j]:offsets[j+1]``, one row per ionic step, with the wall time at its
end, so progress queries are a ``searchsorted`` on one job's rows. SCF lines
are not stored; :meth:`VaspJobs.oszicar_text` synthesises them on demand from
a per-job seed, consistently with the stored per-step SCF counts.

Layout: :mod:`cosim.workloads.vasp_params` (vocabulary and
:class:`VaspParams`), :mod:`cosim.workloads.vasp_draws` (the random draws,
layer by layer), :mod:`cosim.workloads.vasp_result` (:class:`VaspJobs`), and
here the entry point :func:`generate_vasp`, which re-exports the public names.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

import numpy as np

from cosim.errors import WorkloadError, did_you_mean
from cosim.workloads.base import Workload
from cosim.workloads.vasp_draws import _jobs, _n_ionic, _rows, _scf_lines, _templates, _users
from cosim.workloads.vasp_params import (
    _KB,
    _NODES_PER_GROUP,
    CATEGORICAL,
    EXHOST_GROUPS,
    FEATURES,
    KINDS,
    WALLTIMES,
    VaspParams,
)
from cosim.workloads.vasp_result import VaspJobs

__all__ = [
    "FEATURES",
    "CATEGORICAL",
    "KINDS",
    "WALLTIMES",
    "EXHOST_GROUPS",
    "VaspParams",
    "VaspJobs",
    "generate_vasp",
]



# ----------------------------------------------------------------------------- entry point


def _check_params(n_jobs, seed, n_users, mean_interarrival, params: dict) -> VaspParams:
    if not isinstance(n_jobs, int | np.integer) or isinstance(n_jobs, bool) or n_jobs < 0:
        raise WorkloadError("vasp.n_jobs", repr(n_jobs), "a non-negative integer")
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
        raise WorkloadError("vasp.seed", repr(seed), "a non-negative integer")
    if not isinstance(n_users, int | np.integer) or isinstance(n_users, bool) or n_users < 1:
        raise WorkloadError("vasp.n_users", repr(n_users), "a positive integer")
    if not (isinstance(mean_interarrival, int | float) and math.isfinite(mean_interarrival)
            and mean_interarrival > 0):
        raise WorkloadError("vasp.mean_interarrival", repr(mean_interarrival), "a positive number of seconds")
    names = [f.name for f in fields(VaspParams)]
    for key in params:
        if key not in names:
            hint = did_you_mean(key, names)
            raise WorkloadError(f"vasp.{key}", "an unknown parameter",
                                f"one of {', '.join(names)}" + (f" ({hint})" if hint else ""))
    p = replace(VaspParams(), **params)
    shares = np.asarray(p.kind_shares, dtype=np.float64)
    if shares.shape != (4,) or np.any(shares < 0) or shares.sum() <= 0:
        raise WorkloadError("vasp.kind_shares", repr(p.kind_shares),
                            "four non-negative shares (single point, relaxation, MD, phonon)")
    if p.arrival not in ("poisson", "daily"):
        raise WorkloadError("vasp.arrival", repr(p.arrival), "'poisson' or 'daily'")
    if not 0 <= p.daily_amplitude < 1:
        raise WorkloadError("vasp.daily_amplitude", repr(p.daily_amplitude), "a number in [0, 1)")
    for name in ("cost_scale", "runtime_cap", "max_cores", "cores_per_atom", "atoms_median"):
        value = getattr(p, name)
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise WorkloadError(f"vasp.{name}", repr(value), "a positive number")
    for name in ("kind_loyalty", "template_change", "straggler_prob", "hard_fraction", "max_request_share"):
        value = getattr(p, name)
        if not (isinstance(value, int | float) and 0 <= value <= 1):
            raise WorkloadError(f"vasp.{name}", repr(value), "a probability in [0, 1]")
    return p


def _arrivals(rng: np.random.Generator, n: int, mean_gap: float, p: VaspParams) -> np.ndarray:
    """Submit times: Poisson, or Poisson with a daily cycle (same mean rate)."""
    work = np.cumsum(rng.exponential(mean_gap, n))
    if p.arrival == "poisson" or n == 0:
        return work
    # Daily cycle: Lambda(t) = t + a D/(2 pi) [sin(2 pi (t - peak)/D) + sin(2 pi peak/D)]
    # is the expected work done by time t; invert it on a grid (Lambda is increasing).
    day, a, peak = 86400.0, p.daily_amplitude, p.peak_hour * 3600.0
    grid = np.linspace(0.0, work[-1] * 1.05 + day, int(work[-1] * 1.05 / 60.0) + 1442)
    lam = grid + a * day / (2 * math.pi) * (np.sin(2 * math.pi * (grid - peak) / day)
                                            + math.sin(2 * math.pi * peak / day))
    return np.interp(work, lam, grid)


def generate_vasp(n_jobs: int, *, seed: int, n_users: int = 100, mean_interarrival: float = 120.0,
                  population_seed: int | None = None, **params) -> VaspJobs:
    """Generate ``n_jobs`` VASP jobs with their inputs and trajectories.

    Args:
        n_jobs: number of jobs.
        seed: seed of the one ``SeedSequence`` all draws come from.
        n_users: number of users (activity is lognormal, a few dominate).
        mean_interarrival: mean time between submits (s).
        population_seed: seed of the centre itself (its users, their project
            templates and hidden speed factors); None draws it from ``seed``.
            Two streams with one ``population_seed`` and different ``seed``s
            are one centre's history and its future, which is how a centre
            trains predictors on its past and schedules what comes next.
        **params: any field of :class:`VaspParams`.

    Returns:
        The jobs and their trajectories.

    Raises:
        WorkloadError: a bad parameter (named ``vasp.<name>``).

    Examples:
        >>> jobs = generate_vasp(200, seed=1)
        >>> w = jobs.workload
        >>> len(w), bool((w.run <= 60000).all()), bool((w.procs <= 100).all())
        (200, True, True)
        >>> jobs.progress_at(0, float(w.run[0])) == (int(jobs.n_ionic[0]), 0)
        True
    """
    p = _check_params(n_jobs, seed, n_users, mean_interarrival, params)
    ss = np.random.SeedSequence(seed)
    # The sixth stream (SCF lines) was added later: the first five keep their draws.
    r_users, r_jobs, r_traj, r_arr, r_req, r_scf = (np.random.default_rng(s) for s in ss.spawn(6))
    if population_seed is not None:
        if not isinstance(population_seed, int | np.integer) or population_seed < 0:
            raise WorkloadError("vasp.population_seed", repr(population_seed),
                                "a non-negative integer")
        r_users = np.random.default_rng(np.random.SeedSequence([int(population_seed), 7]))
    users = _users(r_users, n_users, p)
    tpl = _templates(r_users, int(users["n_templates"].sum()), p)
    node_slow = r_users.lognormal(0.0, p.node_sigma, (len(EXHOST_GROUPS), _NODES_PER_GROUP))

    shares = np.asarray(p.kind_shares, dtype=np.float64) / sum(p.kind_shares)
    user = r_jobs.choice(n_users, size=n_jobs, p=users["activity"])
    kind = np.where(r_jobs.random(n_jobs) < p.kind_loyalty, users["favourite"][user],
                    r_jobs.choice(4, size=n_jobs, p=shares))

    # Draw, simulate, and redraw the jobs over the cap (kind kept; user kept at first).
    parts: list[tuple[np.ndarray, dict, np.ndarray, dict]] = []
    todo = np.arange(n_jobs)
    for round_ in range(60):
        if len(todo) == 0:
            break
        if round_ >= 5:
            user[todo] = r_jobs.choice(n_users, size=len(todo), p=users["activity"])
        jp = _jobs(r_jobs, users, tpl, user[todo], kind[todo], node_slow, p)
        n_ion, hit = _n_ionic(r_traj, jp)
        # Cheap screen before simulating rows: at least NELMIN SCF steps per ionic step.
        floor = jp["startup"] + jp["t_scf"] * n_ion * np.maximum(jp["NELMIN"], 2)
        sure = floor <= p.runtime_cap
        if not sure.all():
            todo_next = todo[~sure]
            todo = todo[sure]
            jp = {k: v[sure] for k, v in jp.items()}
            n_ion, hit = n_ion[sure], hit[sure]
        else:
            todo_next = todo[:0]
        rows = _rows(r_traj, jp, n_ion, hit, p)
        run = rows["elapsed"][rows["offsets"][1:] - 1] + jp["final_io"]
        ok = run <= p.runtime_cap
        keep_rows = np.repeat(ok, n_ion)
        parts.append((todo[ok], {k: v[ok] for k, v in jp.items()}, run[ok],
                      {k: v[keep_rows] for k, v in rows.items() if k != "offsets"} | {"n": n_ion[ok]}))
        todo = np.sort(np.concatenate([todo[~ok], todo_next]))
    if len(todo):
        raise WorkloadError("vasp.runtime_cap", f"{len(todo)} jobs still above {p.runtime_cap:g} s "
                            "after 60 redraws", "parameters that give jobs under the cap")

    order_parts = np.concatenate([pt[0] for pt in parts]) if parts else np.zeros(0, np.int64)
    inv = np.argsort(order_parts, kind="stable")
    job = {k: np.concatenate([pt[1][k] for pt in parts])[inv] for k in parts[0][1]} if parts else {}
    run = np.concatenate([pt[2] for pt in parts])[inv] if parts else np.zeros(0)
    counts_part = np.concatenate([pt[3]["n"] for pt in parts]) if parts else np.zeros(0, np.int64)
    row_job = np.repeat(order_parts, counts_part)
    row_order = np.argsort(row_job, kind="stable")
    row_keys = ("elapsed", "energy", "denergy", "max_force", "scf_steps", "scf_err0",
                "scf_nelmdl", "scf_stuck")
    flat = {k: np.concatenate([pt[3][k] for pt in parts])[row_order]
            for k in row_keys} if parts else {k: np.zeros(0) for k in row_keys}
    n_ionic = counts_part[inv] if parts else np.zeros(0, np.int64)
    offsets = np.concatenate([[0], np.cumsum(n_ionic)]).astype(np.int64)
    first_row = np.zeros(int(offsets[-1]), dtype=bool)
    first_row[offsets[:-1][n_ionic > 0]] = True
    scf_n = flat["scf_steps"].astype(np.int64)
    scf_de = _scf_lines(r_scf, scf_n, flat.pop("scf_nelmdl"), flat.pop("scf_err0"),
                        flat.pop("scf_stuck").astype(bool),
                        np.repeat(job["EDIFF"], n_ionic) if n_jobs else np.zeros(0),
                        flat["energy"], first_row)
    scf_offsets = np.concatenate([[0], np.cumsum(scf_n)]).astype(np.int64)

    submit = _arrivals(r_arr, n_jobs, float(mean_interarrival), p)
    # Times to the millisecond, as accounting records keep them: numpy's exp/log
    # differ in the last bits between CPU instruction sets (AVX-512 or AVX2
    # kernels), and rounding keeps those differences out of the workload, so
    # one seed is one workload on every machine.
    submit = np.round(submit, 3)
    run = np.round(run, 3)
    flat["elapsed"] = np.minimum(np.round(flat["elapsed"], 3), np.repeat(run, n_ionic))
    req = _requests(r_req, users, job, run, p) if n_jobs else np.zeros(0)
    features = _features(job) if n_jobs else (
        {k: np.zeros(0) for k in FEATURES} | {k: np.zeros(0, dtype="<U1") for k in CATEGORICAL}
        | {"kind": np.zeros(0, dtype="<U1"), "multi_ionic": np.zeros(0, dtype=bool)})
    workload = Workload.from_columns(
        submit=submit, run=run, procs=job.get("cores", np.zeros(0, np.int64)), req_time=req,
        job_id=np.arange(1, n_jobs + 1), mem=np.zeros(n_jobs), user=job.get("user", np.zeros(0)),
        features=features, source=f"vasp(n_jobs={n_jobs}, seed={seed})")
    for arr in (*flat.values(), offsets, scf_offsets, scf_de):
        arr.flags.writeable = False
    hidden = {"speed": job.get("hidden", np.zeros(0)), "straggler": job.get("straggler", np.zeros(0, bool)),
              "t_scf": job.get("t_scf", np.zeros(0))}
    render_keys = ("render_seed", "kind", "ALGO", "ISPIN", "EDIFF", "NELM", "atoms", "restart",
                   "ISTART", "ISMEAR", "SIGMA", "ncg_base", "startup")
    render = {k: job[k] for k in render_keys} if n_jobs else {k: np.zeros(0) for k in render_keys}
    if n_jobs:
        render["mag"] = job["mag_per_atom"] * job["atoms"]
        render["e_tot"] = job["F_final"] + 3 * job["atoms"] * _KB * job["temp_md"]
    return VaspJobs(workload, offsets, flat["elapsed"], flat["energy"], flat["denergy"],
                    flat["max_force"], flat["scf_steps"].astype(np.int32), hidden, render, p, seed,
                    scf_offsets=scf_offsets, scf_de=scf_de)


def _requests(rng: np.random.Generator, users: dict, job: dict, run: np.ndarray,
              p: VaspParams) -> np.ndarray:
    """Requested walltimes: a margin on a noisy guess, rounded up to a round value."""
    n = len(run)
    guess = run / job["slowdown"] * rng.lognormal(0.0, p.guess_sigma, n)
    want = guess * users["margin"][job["user"]]
    walltimes = np.asarray(WALLTIMES)
    req = walltimes[np.minimum(np.searchsorted(walltimes, want), len(walltimes) - 1)]
    return np.where(users["always_max"][job["user"]], users["max_request"][job["user"]], req)


def _features(job: dict) -> dict[str, np.ndarray]:
    """Table-1 feature columns plus ``kind`` and ``multi_ionic``."""
    f = {
        "NELECT": job["NELECT"], "NSW": job["NSW"], "SystemVolume": job["SystemVolume"],
        "AtomNumber": job["atoms"], "ElecNumber": job["ElecNumber"], "NELM": job["NELM"],
        "ElementTypeNumber": np.minimum(job["ntypes"], job["atoms"]), "ENCUT": job["ENCUT"],
        "EDIFFG": job["EDIFFG"], "EDIFF": job["EDIFF"], "numExhosts": job["hosts"],
        "cores": job["cores"], "NELMIN": job["NELMIN"], "ISPIN": job["ISPIN"], "SIGMA": job["SIGMA"],
        "ICHARG": job["ICHARG"], "ISYM": job["ISYM"], "ISMEAR": job["ISMEAR"], "IBRION": job["IBRION"],
        "ISTART": job["ISTART"],
    }
    out = {k: np.asarray(f[k], dtype=np.float64) for k in FEATURES}
    cat = {"ALGO": job["ALGO"], "PREC": job["PREC"], "GGA": job["GGA"], "LREAL": job["LREAL"],
           "KPointMethod": job["KPointMethod"], "ExhostsGroup": job["group"]}
    out.update({k: np.asarray(cat[k]).astype(str) for k in CATEGORICAL})
    out["kind"] = np.asarray(KINDS)[job["kind"]]
    out["multi_ionic"] = job["kind"] != 0
    return out
