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
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field, fields, replace

import numpy as np

from cosim.errors import WorkloadError
from cosim.workloads.base import Workload
from cosim.workloads.oszicar import (
    ElectronicStep,
    IonicStep,
    MdStep,
    OszicarRun,
    format_oszicar,
)

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

#: Job kinds; single points are the single-ionic jobs, the others multi-ionic.
KINDS: tuple[str, ...] = ("single_point", "relaxation", "md", "phonon")

#: Numeric input features of RLSchert's Table 1 (seed 001), named as there.
#: Integer-coded INCAR tags (ISPIN, ICHARG, ISYM, ISMEAR, IBRION, ISTART) are
#: numeric; "ElecNumber" is the valence electron count of the structure and
#: "NELECT" the count VASP uses (they differ for charged cells).
FEATURES: tuple[str, ...] = (
    "NELECT", "NSW", "SystemVolume", "AtomNumber", "ElecNumber", "NELM",
    "ElementTypeNumber", "ENCUT", "EDIFFG", "EDIFF", "numExhosts", "cores",
    "NELMIN", "ISPIN", "SIGMA", "ICHARG", "ISYM", "ISMEAR", "IBRION", "ISTART",
)

#: Categorical features of Table 1, name -> fixed vocabulary (unknown is "").
#: GGA holds the exchange-correlation family: the GGA tag, or METAGGA/HYBRID
#: when those tags are set. "Other" collects values outside the vocabulary.
CATEGORICAL: dict[str, tuple[str, ...]] = {
    "ALGO": ("Normal", "Fast", "VeryFast", "All", "Damped", "Other"),
    "PREC": ("Low", "Medium", "Normal", "Accurate", "High", "Single"),
    "GGA": ("PE", "PS", "91", "RP", "AM", "LDA", "METAGGA", "HYBRID", "Other"),
    "LREAL": ("False", "Auto", "On", "True"),
    "KPointMethod": ("Gamma", "Monkhorst-Pack", "Auto", "KSPACING", "Explicit", "Line-mode"),
    "ExhostsGroup": ("cpu24", "cpu28", "cpu32", "cpu64", "Other"),
}

#: Round walltimes users ask for (s): 15, 30 min, 1, 2, 4, 6, 12, 24, 48 h.
WALLTIMES: tuple[float, ...] = (900.0, 1800.0, 3600.0, 7200.0, 14400.0, 21600.0,
                                43200.0, 86400.0, 172800.0)

#: Node groups of the synthetic centre: name -> (cores per node, relative speed).
#: The group is a feature (known), unlike the per-node factors.
EXHOST_GROUPS: dict[str, tuple[int, float]] = {
    "cpu24": (24, 1.00), "cpu28": (28, 1.10), "cpu32": (32, 1.25), "cpu64": (64, 1.15),
}
_NODES_PER_GROUP = 64
_KB = 8.617333e-5  # Boltzmann constant, eV/K


@dataclass(frozen=True)
class VaspParams:
    """Tunable parameters of :func:`generate_vasp` (pass them as keywords).

    Attributes:
        kind_shares: shares of single point, relaxation, MD, phonon.
        kind_loyalty: probability that a job takes its user's favourite kind
            instead of a draw from ``kind_shares``.
        cost_scale: ``C`` in ``t_scf = C W ...`` (s per unit of work); calibrated
            so the mean run time is about 50 min (RLSchert). ``VASP.md``
            suggests 2.5e-6 for its structure mix; ours has larger systems and
            k-meshes, hence a smaller C for the same mean.
        runtime_cap: longest run time kept (s); RLSchert's 1000 min.
        max_cores: largest core count (RLSchert: 100).
        cores_per_atom: median cores per atom users choose for a template.
        atoms_median: median atoms of a template structure.
        templates_per_user: mean number of project templates per user.
        template_change: probability of each small change to a template field.
        arrival: ``"poisson"`` or ``"daily"`` (daily cycle, same mean rate).
        daily_amplitude: relative amplitude ``a`` of the daily cycle (0-1).
        peak_hour: hour of the day with the most arrivals.
        user_sigma: lognormal sigma of the hidden per-user speed factor.
        node_sigma: lognormal sigma of the hidden per-node speed factor.
        job_sigma: lognormal sigma of the per-job noise with identical inputs.
        straggler_prob: share of stragglers.
        straggler_slowdown: range of their slowdown factor.
        step_cv: coefficient of variation of the step-to-step time jitter.
        startup_median: median start-up time (s) before the first SCF step.
        final_io_median: median time (s) after the last ionic step (writing files).
        hard_fraction: share of templates whose SCF converges slowly and hits NELM.
        walltime_margin: median factor users put on their run-time guess.
        guess_sigma: lognormal sigma of a user's run-time guess.
        max_request_share: share of users who always request their maximum.
    """

    kind_shares: tuple[float, float, float, float] = (0.70, 0.20, 0.05, 0.05)
    kind_loyalty: float = 0.2
    cost_scale: float = 0.42e-6
    runtime_cap: float = 60000.0
    max_cores: int = 100
    cores_per_atom: float = 1.2
    atoms_median: float = 16.0
    templates_per_user: float = 2.5
    template_change: float = 0.12
    arrival: str = "poisson"
    daily_amplitude: float = 0.6
    peak_hour: float = 14.0
    user_sigma: float = 0.10
    node_sigma: float = 0.05
    job_sigma: float = 0.06
    straggler_prob: float = 0.021
    straggler_slowdown: tuple[float, float] = (3.0, 6.7)
    step_cv: float = 0.19
    startup_median: float = 42.0
    final_io_median: float = 10.0
    hard_fraction: float = 0.10
    walltime_margin: float = 2.5
    guess_sigma: float = 0.35
    max_request_share: float = 0.15


# ----------------------------------------------------------------------------- helpers


def _pick(rng: np.random.Generator, values, p, size) -> np.ndarray:
    """Draw ``size`` items of ``values`` with probabilities ``p``."""
    values = np.asarray(values)
    p = np.asarray(p, dtype=np.float64)
    return values[rng.choice(len(values), size=size, p=p / p.sum())]


def _lognormal_mean1(rng: np.random.Generator, cv: float, size) -> np.ndarray:
    """Lognormal factors with mean 1 and coefficient of variation ``cv``."""
    sigma = math.sqrt(math.log1p(cv * cv))
    return rng.lognormal(-sigma * sigma / 2, sigma, size)


def _snap(values: np.ndarray, options: np.ndarray) -> np.ndarray:
    """Nearest option in log space for each value."""
    lv = np.log(np.maximum(values, 1e-9))[:, None]
    return options[np.argmin(np.abs(lv - np.log(options)[None, :]), axis=1)]


@dataclass
class _Segments:
    """Index helpers for flat per-job rows (CSR)."""

    counts: np.ndarray

    def __post_init__(self):
        self.offsets = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)
        self.job = np.repeat(np.arange(len(self.counts)), self.counts)
        self.k = np.arange(self.offsets[-1]) - self.offsets[self.job]
        self.last = np.zeros(self.offsets[-1], dtype=bool)
        self.last[self.offsets[1:][self.counts > 0] - 1] = True

    def cumsum(self, x: np.ndarray) -> np.ndarray:
        """Cumulative sum restarting at each job."""
        cs = np.cumsum(x)
        start = self.offsets[:-1][self.counts > 0]
        base = np.zeros(len(self.counts))
        base[self.counts > 0] = cs[start] - x[start]
        return cs - base[self.job]


# ----------------------------------------------------------------------------- users and templates


def _users(rng: np.random.Generator, n_users: int, p: VaspParams) -> dict[str, np.ndarray]:
    n_tpl = 1 + np.minimum(rng.poisson(max(p.templates_per_user - 1, 0), n_users), 5)
    return {
        "activity": (a := rng.lognormal(0.0, 1.0, n_users)) / a.sum(),
        "speed": rng.lognormal(0.0, p.user_sigma, n_users),
        "margin": p.walltime_margin * rng.lognormal(0.0, 0.35, n_users),
        "always_max": rng.random(n_users) < p.max_request_share,
        "max_request": _pick(rng, [86400.0, 172800.0], [0.7, 0.3], n_users),
        "favourite": rng.choice(4, size=n_users, p=np.asarray(p.kind_shares) / sum(p.kind_shares)),
        "n_templates": n_tpl,
        "first_template": np.concatenate([[0], np.cumsum(n_tpl)[:-1]]),
    }


_GROUP_NAMES = np.array(list(EXHOST_GROUPS))
_CORE_OPTIONS = {
    "cpu24": [1, 2, 4, 6, 8, 12, 24, 48, 72, 96],
    "cpu28": [1, 2, 4, 7, 14, 28, 56, 84],
    "cpu32": [1, 2, 4, 8, 16, 32, 64, 96],
    "cpu64": [1, 2, 4, 8, 16, 32, 64, 96],
}


def _templates(rng: np.random.Generator, n: int, p: VaspParams) -> dict[str, np.ndarray]:
    """Project templates: a structure and the INCAR habits of one project."""
    atoms = np.clip(np.rint(rng.lognormal(math.log(p.atoms_median), 0.8, n)), 1, 400).astype(np.int64)
    ntypes = np.minimum(atoms, 1 + rng.binomial(4, 0.3, n))
    vacuum = np.where(rng.random(n) < 0.25, rng.uniform(1.5, 3.0, n), 1.0)
    group = _pick(rng, _GROUP_NAMES, [0.30, 0.30, 0.25, 0.15], n)
    desired = atoms * p.cores_per_atom * rng.lognormal(0.0, 0.8, n)
    cores = np.empty(n, dtype=np.int64)
    for g in _GROUP_NAMES:
        m = group == g
        cores[m] = _snap(desired[m], np.asarray(_CORE_OPTIONS[g], dtype=np.float64))
    cores = np.minimum(cores, p.max_cores)
    ismear = _pick(rng, [-5, 0, 1, -1], [0.25, 0.5, 0.15, 0.10], n)
    gga = _pick(rng, ["PE", "PS", "91", "RP", "AM", "LDA", "METAGGA", "HYBRID"],
                [0.78, 0.07, 0.03, 0.02, 0.01, 0.02, 0.045, 0.025], n)
    f_xc = np.where(gga == "METAGGA", rng.uniform(2.0, 3.0, n),
                    np.where(gga == "HYBRID", rng.uniform(20.0, 80.0, n), 1.0))
    isym = _pick(rng, [2, 0, 1, -1], [0.6, 0.2, 0.1, 0.1], n)
    symred = np.where(isym > 0, np.clip(rng.lognormal(math.log(4.0), 0.8, n), 1.0, 48.0),
                      np.where(isym == 0, 2.0, 1.0))  # ISYM=0 keeps time-reversal symmetry
    return {
        "atoms": atoms,
        "ntypes": ntypes,
        "vol_per_atom": rng.uniform(10.0, 24.0, n) * vacuum,
        "val_per_atom": rng.uniform(3.0, 11.0, n),
        "charge": np.where(rng.random(n) < 0.05, _pick(rng, [-2, -1, 1, 2], [1, 3, 3, 1], n), 0),
        "group": group,
        "cores": cores,
        "ENCUT": _pick(rng, [400, 450, 500, 520, 550, 600, 700],
                       [0.15, 0.1, 0.25, 0.25, 0.05, 0.15, 0.05], n).astype(np.float64),
        "PREC": _pick(rng, ["Normal", "Accurate", "High", "Low", "Medium"],
                      [0.45, 0.45, 0.05, 0.02, 0.03], n),
        "ALGO": _pick(rng, ["Normal", "Fast", "VeryFast", "All", "Damped"],
                      [0.35, 0.5, 0.1, 0.03, 0.02], n),
        "GGA": gga,
        "f_xc": f_xc,
        "f_u": np.where(rng.random(n) < 0.25, 1.1, 1.0),  # +U (LDAU) is not a feature: hidden
        "ISPIN": _pick(rng, [1, 2], [0.5, 0.5], n),
        "ISMEAR": ismear,
        "SIGMA": np.where(ismear == -5, 0.05, _pick(rng, [0.01, 0.02, 0.05, 0.1, 0.2],
                                                     [0.1, 0.15, 0.4, 0.2, 0.15], n)),
        "LREAL": np.where(atoms >= 20, _pick(rng, ["Auto", "False", "On"], [0.75, 0.15, 0.1], n),
                          _pick(rng, ["False", "Auto"], [0.7, 0.3], n)),
        "KPointMethod": _pick(rng, ["Monkhorst-Pack", "Gamma", "KSPACING", "Auto"],
                              [0.4, 0.4, 0.1, 0.1], n),
        "kppa": _pick(rng, [500.0, 1000.0, 2000.0, 4000.0, 8000.0], [0.15, 0.3, 0.3, 0.2, 0.05], n),
        "ISYM": isym,
        "symred": symred,
        "EDIFF": _pick(rng, [1e-4, 1e-5, 1e-6, 1e-7, 1e-8], [0.3, 0.35, 0.25, 0.07, 0.03], n),
        "EDIFFG": _pick(rng, [-0.01, -0.02, -0.03, -0.05, -0.1, 1e-3, 0.0],
                        [0.2, 0.25, 0.1, 0.2, 0.05, 0.05, 0.15], n),
        "NELM": _pick(rng, [60, 100, 200, 40], [0.55, 0.3, 0.1, 0.05], n),
        "NELMIN": _pick(rng, [2, 4, 5, 6, 8], [0.6, 0.15, 0.05, 0.15, 0.05], n),
        "hard": rng.random(n) < p.hard_fraction,
        "scf_rate": rng.lognormal(0.0, 0.2, n),
        "e_per_atom": rng.uniform(-9.0, -3.0, n),
        "mag_per_atom": np.where(rng.random(n) < 0.5, 0.0, rng.lognormal(math.log(0.5), 0.8, n)),
        "ibrion_relax": _pick(rng, [2, 1, 3], [0.6, 0.35, 0.05], n),
        "nsw_relax": _pick(rng, [10, 20, 30, 50, 60, 99, 100, 200],
                           [0.05, 0.08, 0.07, 0.15, 0.1, 0.25, 0.2, 0.1], n),
        "nsw_md": _pick(rng, [100, 200, 500, 1000, 2000, 5000], [0.15, 0.25, 0.3, 0.15, 0.1, 0.05], n),
        "temp_md": _pick(rng, [300.0, 500.0, 800.0, 1000.0, 1500.0, 2000.0],
                         [0.35, 0.2, 0.15, 0.15, 0.1, 0.05], n),
        "ibrion_phonon": _pick(rng, [6, 5], [0.7, 0.3], n),
    }


# ----------------------------------------------------------------------------- jobs


def _jobs(rng: np.random.Generator, users: dict, tpl: dict, user: np.ndarray, kind: np.ndarray,
          node_slow: np.ndarray, p: VaspParams) -> dict[str, np.ndarray]:
    """Per-job inputs, hidden factors and time per SCF step for the given users/kinds."""
    n = len(user)
    t = users["first_template"][user] + (rng.random(n) * users["n_templates"][user]).astype(np.int64)
    j = {k: v[t] for k, v in tpl.items()}
    j["user"], j["kind"], j["template"] = user, kind, t
    ch = p.template_change

    # Small changes to the template: the reuse users really do.
    m = rng.random(n) < ch
    j["ENCUT"] = np.where(m, np.maximum(250.0, j["ENCUT"] + _pick(rng, [-50.0, 50.0, 100.0], [1, 2, 1], n)),
                          j["ENCUT"])
    m = rng.random(n) < ch
    j["kppa"] = np.where(m, j["kppa"] * _pick(rng, [0.5, 2.0], [1, 1], n), j["kppa"])
    m = rng.random(n) < ch
    delta = _pick(rng, ["super", "defect", "adsorbate"], [0.3, 0.4, 0.3], n)
    atoms = j["atoms"].copy()
    atoms = np.where(m & (delta == "super"), atoms * 2, atoms)
    atoms = np.where(m & (delta == "defect"), np.maximum(1, atoms - 1), atoms)
    atoms = np.where(m & (delta == "adsorbate"), atoms + rng.integers(1, 5, n), atoms)
    j["atoms"] = atoms
    m = rng.random(n) < ch
    j["cores"] = np.where(m, np.clip(j["cores"] * _pick(rng, [0.5, 2.0], [1, 1], n), 1, p.max_cores),
                          j["cores"]).astype(np.int64)
    m = rng.random(n) < ch
    j["EDIFF"] = np.where(m, j["EDIFF"] * _pick(rng, [0.1, 10.0], [1, 1], n), j["EDIFF"])
    j["EDIFF"] = np.clip(j["EDIFF"], 1e-8, 1e-3)
    m = rng.random(n) < ch / 2
    j["ALGO"] = np.where(m, _pick(rng, ["Normal", "Fast", "VeryFast"], [1, 1, 1], n), j["ALGO"])
    m = rng.random(n) < ch / 2
    j["ISPIN"] = np.where(m, 3 - j["ISPIN"], j["ISPIN"])
    m = rng.random(n) < ch / 2
    j["PREC"] = np.where(m, _pick(rng, ["Normal", "Accurate"], [1, 1], n), j["PREC"])

    # Structure.
    elec = np.maximum(1, np.rint(atoms * j["val_per_atom"])).astype(np.int64)
    j["ElecNumber"] = elec.astype(np.float64)
    j["NELECT"] = np.maximum(1, elec - j["charge"]).astype(np.float64)
    j["SystemVolume"] = atoms * j["vol_per_atom"]

    # Kind-specific INCAR tags and starting state.
    sp, rel, md, ph = (kind == i for i in range(4))
    j["NSW"] = np.select([sp, rel, md, ph], [0, j["nsw_relax"], j["nsw_md"], 1]).astype(np.int64)
    j["IBRION"] = np.select([sp, rel, md, ph], [-1, j["ibrion_relax"], 0, j["ibrion_phonon"]])
    j["NELMIN"] = np.where(md, np.maximum(j["NELMIN"], 4), j["NELMIN"])
    j["EDIFF"] = np.where(md, np.maximum(j["EDIFF"], 1e-5), j["EDIFF"])  # MD uses loose EDIFF
    j["ISYM"] = np.where(md, 0, j["ISYM"])
    start = _pick(rng, ["new", "restart", "chgcar", "wave0", "bands"],
                  [0.70, 0.12, 0.08, 0.05, 0.05], n)
    start = np.where(sp | (start != "bands"), start, "new")  # band structures are single points
    j["ISTART"] = np.select([start == "restart", start == "wave0"], [1, 1], 0)
    j["ICHARG"] = np.select([start == "restart", start == "chgcar", start == "wave0", start == "bands"],
                            [1, 1, 0, 11], 2)
    bands = start == "bands"
    j["KPointMethod"] = np.where(bands, "Line-mode", j["KPointMethod"])
    j["ISYM"] = np.where(bands, 0, j["ISYM"])
    j["restart"] = (j["ISTART"] > 0) | (j["ICHARG"] == 1)

    # k-points: a density per reciprocal atom, reduced by symmetry.
    nk_total = np.maximum(1.0, np.rint(j["kppa"] / atoms))
    symred = np.where(md | (j["ISYM"] <= 0), np.where(j["ISYM"] == 0, 2.0, 1.0), j["symred"])
    nk = np.maximum(1.0, np.ceil(nk_total / symred))
    j["nk"] = np.where(bands, np.rint(rng.uniform(40, 200, n)), nk)

    # Execution hosts: usually the fewest nodes that hold the cores, sometimes scattered.
    group = j["group"].copy()
    moved = rng.random(n) < 0.15  # submitted to another partition this time
    group = np.where(moved, _pick(rng, _GROUP_NAMES, [1, 1, 1, 1], n), group)
    j["group"] = group
    gidx = np.searchsorted(_GROUP_NAMES, group)  # names are sorted
    cpn = np.array([EXHOST_GROUPS[g][0] for g in _GROUP_NAMES])[gidx]
    hosts = np.ceil(j["cores"] / cpn).astype(np.int64)
    spread = (rng.random(n) < 0.15) & (j["cores"] > hosts)
    hosts = np.where(spread, np.minimum(j["cores"], hosts + rng.integers(1, 3, n)), hosts)
    j["hosts"] = hosts
    seg = _Segments(hosts)
    node = rng.integers(0, _NODES_PER_GROUP, seg.offsets[-1])
    node_factor = np.maximum.reduceat(node_slow[gidx[seg.job], node], seg.offsets[:-1])

    # Cost of one SCF step (VASP.md).
    npw = j["SystemVolume"] * (j["ENCUT"] / 3.81) ** 1.5 / (6 * math.pi ** 2)
    nbands = np.maximum(np.ceil((j["NELECT"] + 2) / 2) + np.maximum(atoms // 2, 3),
                        np.floor(0.6 * j["NELECT"]))
    work = j["nk"] * j["ISPIN"] * nbands * npw * np.log(np.maximum(npw, 2.0)) * (1 + nbands / 2000)
    f_prec = np.select([np.isin(j["PREC"], ["Accurate", "High"]), np.isin(j["PREC"], ["Low", "Medium"])],
                       [1.3, 0.8], 1.0)
    f_lreal = np.where(j["LREAL"] == "False", 1.0 + atoms / 100.0, 1.0)
    serial = np.clip(0.25 / atoms, 0.002, 0.05)
    speedup = 1.0 / (serial + (1 - serial) / j["cores"])
    comm = 1.0 + 0.05 * (hosts - 1)
    group_speed = np.array([EXHOST_GROUPS[g][1] for g in _GROUP_NAMES])[gidx]
    t_visible = p.cost_scale * work * f_prec * f_lreal * j["f_xc"]
    t_visible = t_visible * comm / (speedup * group_speed)
    straggler = rng.random(n) < p.straggler_prob
    slow = np.where(straggler, rng.uniform(*p.straggler_slowdown, n), 1.0)
    hidden = users["speed"][user] * node_factor * rng.lognormal(0.0, p.job_sigma, n) * j["f_u"]
    j["t_scf"] = t_visible * hidden * slow
    j["straggler"], j["slowdown"] = straggler, slow
    j["hidden"] = hidden * slow
    j["startup"] = rng.lognormal(math.log(p.startup_median), 0.5, n)
    j["final_io"] = rng.lognormal(math.log(p.final_io_median), 0.8, n)
    j["render_seed"] = rng.integers(0, 2**63 - 1, n, dtype=np.int64)

    # Trajectory-shaping draws (per job).
    j["F0"] = np.clip(rng.lognormal(math.log(0.7), 0.8, n), 0.13, 2.9)
    difficult = rng.random(n) < 0.2  # soft modes, bad starting geometries
    j["r_force"] = np.where(difficult, rng.uniform(0.88, 0.97, n), rng.uniform(0.4, 0.85, n))
    j["r_energy"] = rng.uniform(0.6, 0.9, n)
    j["gap1"] = j["F0"] * rng.uniform(0.05, 0.3, n) * np.sqrt(atoms)
    j["p_trial"] = np.where(j["IBRION"] == 2, rng.uniform(0.2, 0.65, n), 0.0)
    j["F_final"] = j["e_per_atom"] * atoms
    j["md_force"] = rng.uniform(0.5, 1.5, n) * np.sqrt(j["temp_md"] / 300.0)
    j["md_period"] = rng.uniform(20.0, 200.0, n)
    j["md_phase"] = rng.uniform(0.0, 2 * math.pi, n)
    j["ph_force"] = rng.uniform(0.05, 0.5, n)
    j["ncg_base"] = np.maximum(8, nbands * np.minimum(j["nk"], 50) * j["ISPIN"] * rng.uniform(1.5, 3.0, n))
    return j


def _n_ionic(rng: np.random.Generator, j: dict) -> tuple[np.ndarray, np.ndarray]:
    """Ionic steps of each job and whether a relaxation converged before NSW."""
    n = len(j["kind"])
    kind, atoms = j["kind"], j["atoms"]
    g = j["EDIFFG"]
    g_eff = np.where(g == 0.0, 10 * j["EDIFF"], g)  # EDIFFG unset: 10 EDIFF (energy)
    j["EDIFFG"] = g_eff
    by_force = g_eff < 0
    steps_f = np.log(j["F0"] / np.abs(g_eff)) / -np.log(j["r_force"])
    # Energy criterion: stop when |F_i - F_{i-1}| = gap1 rE^(i-2) (1-rE) < EDIFFG.
    steps_e = np.log(j["gap1"] * (1 - j["r_energy"]) / np.abs(g_eff)) / -np.log(j["r_energy"])
    conv = 1 + np.ceil(np.maximum(np.where(by_force, steps_f, steps_e), 0)
                       * (1 + 0.5 * j["p_trial"]) + rng.normal(0.0, 1.0, n))
    conv = np.maximum(2, conv).astype(np.int64)
    relax_n = np.minimum(conv, j["NSW"])
    hit_nsw = (kind == 1) & (conv > j["NSW"])
    disp = np.where(j["IBRION"] == 5, 6 * atoms, np.ceil(6 * atoms / j["symred"]))
    n_ionic = np.select([kind == 0, kind == 1, kind == 2, kind == 3],
                        [1, np.maximum(relax_n, 2), j["NSW"], 1 + disp]).astype(np.int64)
    return n_ionic, hit_nsw


def _rows(rng: np.random.Generator, j: dict, n_ionic: np.ndarray, hit_nsw: np.ndarray,
          p: VaspParams) -> dict[str, np.ndarray]:
    """Ionic-step rows of the given jobs (flat, in job order)."""
    s = _Segments(n_ionic)
    r, k, last = s.job, s.k, s.last
    R = len(r)
    kind = j["kind"][r]
    n = n_ionic[r]
    first = k == 0
    relax, md, ph = kind == 1, kind == 2, kind == 3

    # Maximum force.
    F0, g = j["F0"][r], np.abs(j["EDIFFG"][r])
    by_force = (j["EDIFFG"][r] < 0) & ~hit_nsw[r]
    frac = k / np.maximum(n - 1, 1)
    natural_end = np.maximum(F0 * j["r_force"][r] ** (n - 1), g * 1.05)
    f_end = np.where(by_force, g * (0.5 + 0.48 * rng.random(R)), natural_end)
    walk = s.cumsum(rng.normal(0.0, 0.15, R))
    bridge = walk - frac * walk[s.offsets[1:][r] - 1]
    logf = np.log(F0) + frac * (np.log(f_end) - np.log(F0)) + np.where(first | last, 0.0, bridge)
    force = np.exp(logf)
    trial = relax & (rng.random(R) < j["p_trial"][r]) & ~first & ~last
    force = np.where(trial, force * rng.uniform(1.05, 1.5, R), force)
    force = np.where(relax & by_force & ~last, np.maximum(force, g * 1.02), force)
    force = np.where(relax & by_force & last, np.minimum(force, g * 0.99), force)
    force = np.where(md, j["md_force"][r] * rng.lognormal(0.0, 0.15, R), force)
    force = np.where(ph, np.where(first, 0.01 + 0.04 * rng.random(R),
                                  j["ph_force"][r] * rng.lognormal(0.0, 0.1, R)), force)

    # Free energy F.
    F_final = j["F_final"][r]
    gap = j["gap1"][r] * j["r_energy"][r] ** k * rng.lognormal(0.0, 0.1, R)
    gap = np.where(trial, gap * rng.uniform(1.0, 2.0, R) / j["r_energy"][r], gap)
    energy = np.where(relax, F_final + gap, F_final)
    atoms = j["atoms"][r]
    # MD: kinetic energy 1.5 N kB T with T fluctuating by about sqrt(2/(3N)).
    temp = j["temp_md"][r] * (1 + np.sqrt(2 / (3 * atoms)) * np.where(
        first, 0.0, 0.6 * rng.normal(0, 1, R)
        + 0.8 * np.sin(2 * math.pi * k / j["md_period"][r] + j["md_phase"][r])))
    temp = np.maximum(temp, 1.0)
    e_tot = F_final + 3 * atoms * _KB * j["temp_md"][r]
    energy = np.where(md, e_tot - 1.5 * atoms * _KB * temp, energy)
    energy = np.where(ph & ~first, F_final + rng.uniform(0.0005, 0.01, R), energy)

    # d E: F_i - F_{i-1} (F_0 = 0), except IBRION=2 line searches (from their start)
    # and single points, whose d E is a tiny residual.
    prev = np.where(first, 0.0, np.roll(energy, 1))
    new_line = first | ~(relax & (j["IBRION"][r] == 2)) | (rng.random(R) >= j["p_trial"][r])
    idx = np.maximum.accumulate(np.where(new_line, np.arange(R), 0))
    ref = np.where(idx == np.arange(R), prev, np.where(k[idx] == 0, 0.0, energy[idx - 1]))
    denergy = energy - ref
    denergy = np.where(kind == 0, rng.normal(0.0, 1.0, R) * j["EDIFF"][r], denergy)

    # SCF steps.
    ediff, rate = j["EDIFF"][r], j["scf_rate"][r]
    restart = j["restart"][r]
    nelmdl = np.where(restart, 0, np.where((j["ALGO"][r] == "VeryFast") & (j["ISTART"][r] == 0), 12, 5))
    err_first = np.where(restart, 0.05, 1.5) * rng.lognormal(0.0, 0.5, R)
    prev_force = np.where(first, force, np.roll(force, 1))
    err_later = np.select([md, ph], [0.001, 0.005], 0.01 * np.maximum(1.0, prev_force))
    err_later = err_later * rng.lognormal(0.0, 0.4, R)
    spin = np.where(first & (j["ISPIN"][r] == 2), 0.85, 1.0)  # spin slows the first convergence
    decades = np.log10(np.maximum(np.where(first, err_first, err_later) / ediff, 1.0))
    per_step = np.where(first, 0.40, 0.53) * rate * spin
    scf = np.where(first, nelmdl, 0) + np.ceil(decades / per_step * rng.lognormal(0.0, 0.2, R))
    scf = np.clip(scf, j["NELMIN"][r], j["NELM"][r])
    # Hard systems hit NELM often; MD steps start from extrapolated wavefunctions, rarely.
    stuck = j["hard"][r] & (rng.random(R) < np.where(md & ~first, 0.05, 0.6))
    scf = np.where(stuck, j["NELM"][r], scf).astype(np.int32)

    # Wall time: start-up, then SCF steps with step-to-step jitter.
    dur = scf * j["t_scf"][r] * _lognormal_mean1(rng, p.step_cv, R)
    elapsed = j["startup"][r] + s.cumsum(dur)
    # What the SCF lines of each step need (see _scf_lines): where the energy error
    # starts, how many non-self-consistent steps lead, and whether it converged.
    return {"offsets": s.offsets, "elapsed": elapsed, "energy": energy, "denergy": denergy,
            "max_force": force, "scf_steps": scf,
            "scf_err0": np.where(first, err_first, err_later),
            "scf_nelmdl": np.where(first, nelmdl, 0).astype(np.int16), "scf_stuck": stuck}


def _scf_lines(rng: np.random.Generator, n: np.ndarray, nelmdl: np.ndarray, err0: np.ndarray,
               stuck: np.ndarray, ediff: np.ndarray, energy: np.ndarray, first: np.ndarray
               ) -> np.ndarray:
    """``dE`` of every SCF line of every ionic step (flat, rows in order), float32.

    Per ionic step with ``n`` lines: ``nelmdl`` non-self-consistent lines
    whose ``|dE|`` falls about a decade per line from the energy of the
    random start, then the self-consistent lines, whose ``log10 |dE|`` goes
    from ``log10 err0`` to just below ``log10 EDIFF`` (converged) or stays
    above it (a step that hit NELM) along a Brownian bridge plus per-line
    noise: real OSZICARs (``../shared/vasp/``) show plateaus and jumps of a
    decade, so a line through the first few lines does not tell exactly when
    the step converges. The first line of each step is what the energies
    make it: ``E_1 - F_prev``, with ``E_t = F - (dE_{t+1} + ... + dE_n)``, so
    the last line's energy is the step's ``F`` as in VASP.

    Args:
        rng: the generator's own stream for SCF lines.
        n: SCF lines per ionic step; nelmdl: leading non-SC lines;
        err0: energy error (eV) where the self-consistent part starts;
        stuck: the step hit NELM; ediff: EDIFF of each step's job;
        energy: F of each step; first: the first step of its job.
    """
    R = len(n)
    n = n.astype(np.int64)
    nsc = np.minimum(nelmdl.astype(np.int64), np.maximum(n - 1, 0))  # at least one SC line
    s = _Segments(n)
    r, t = s.job, s.k
    if len(r) == 0:
        return np.zeros(0, dtype=np.float32)
    m = (n - nsc)[r]
    u = t - nsc[r]
    sc = u >= 0
    log_ediff = np.log10(ediff)
    a = np.log10(np.maximum(err0, 1e-12))
    b = np.where(stuck, log_ediff + rng.uniform(0.3, 1.5, R), log_ediff - rng.uniform(0.0, 1.5, R))
    wander = 0.25 * rng.lognormal(0.0, 0.4, R)      # per-line sd of the bridge (decades)
    # The second line's |dE| is 1.5-50 |F| in the real files (random start wavefunctions).
    v0 = np.log10(np.abs(energy) + 1.0) + rng.uniform(0.2, 1.7, R)
    drop = rng.uniform(0.6, 1.4, R)
    z = rng.normal(0.0, 1.0, len(r))
    eps = rng.normal(0.0, 0.2, len(r))
    flip = rng.random(len(r))
    walk = s.cumsum(np.where(sc & (u > 0), z * wander[r], 0.0))
    walk_end = walk[s.offsets[1:] - 1]
    frac = np.where(m > 1, np.maximum(u, 0) / np.maximum(m - 1, 1), 1.0)
    last = s.last
    v_sc = a[r] + (b - a)[r] * frac + walk - frac * walk_end[r] + np.where(last, 0.0, eps)
    v_nsc = v0[r] - drop[r] * (t - 1) + eps
    v = np.where(sc, v_sc, v_nsc)
    sign = np.where(sc & (flip >= 0.6), 1.0, -1.0)
    de = sign * 10.0 ** np.clip(v, -12.0, 6.0)
    # First line of each step: E_1 - F_prev, where E_1 = F - (sum of the step's later dE).
    start = s.offsets[:-1]
    later = np.add.reduceat(np.where(t > 0, de, 0.0), start) if len(start) else np.zeros(0)
    f_prev = np.where(first, 0.0, np.roll(energy, 1))
    de[start] = energy - later - f_prev
    return de.astype(np.float32)


# ----------------------------------------------------------------------------- result


@dataclass
class VaspJobs:
    """Generated VASP jobs: a workload plus per-job trajectories.

    Rows of job ``j`` (0-based index in :attr:`workload`) are
    ``offsets[j]:offsets[j+1]`` of the flat arrays, one per ionic step.

    Attributes:
        workload: the jobs (``procs`` = cores, ``mem`` = 0); ``features`` holds
            every column of :data:`FEATURES` (float64) and :data:`CATEGORICAL`
            (str), plus ``kind`` (str) and ``multi_ionic`` (bool).
        offsets: int64, ``n_jobs + 1`` row offsets.
        elapsed: wall time (s since job start) at the end of each ionic step.
        energy: free energy F (eV) of each ionic step.
        denergy: ``d E`` as OSZICAR prints it (eV).
        max_force: largest force on an atom (eV/A).
        scf_steps: SCF (electronic) steps of each ionic step (int32).
        hidden: per-job factors no feature reveals (``speed`` multiplies the
            time per SCF step, ``straggler`` marks stragglers) and
            ``t_scf``, the true mean time per SCF step (s).
        render: per-job values used to synthesise OSZICAR lines (``startup``:
            seconds from the job's start to its first SCF line).
        params: the parameters used; ``seed``: the seed.
        scf_offsets: int64, ``n_rows + 1`` offsets of each ionic step's SCF
            lines in :attr:`scf_de` (None when the lines were not generated).
        scf_de: float32, ``dE`` of every SCF line as OSZICAR prints it (eV);
            ``log10 |dE|`` is the convergence signal of the step under way
            (:meth:`scf_trace`).

    Examples:
        >>> jobs = generate_vasp(50, seed=3)
        >>> len(jobs), jobs.progress_at(0, 0.0)
        (50, (0, 0))
    """

    workload: Workload
    offsets: np.ndarray
    elapsed: np.ndarray
    energy: np.ndarray
    denergy: np.ndarray
    max_force: np.ndarray
    scf_steps: np.ndarray
    hidden: dict[str, np.ndarray] = field(default_factory=dict)
    render: dict[str, np.ndarray] = field(default_factory=dict)
    params: VaspParams = field(default_factory=VaspParams)
    seed: int | None = None
    scf_offsets: np.ndarray | None = None
    scf_de: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.workload)

    @property
    def n_ionic(self) -> np.ndarray:
        """Ionic steps of each job."""
        return np.diff(self.offsets)

    def _rows(self, job_index: int) -> tuple[int, int]:
        if not 0 <= job_index < len(self):
            raise IndexError(f"job index {job_index} out of range 0..{len(self) - 1}")
        return int(self.offsets[job_index]), int(self.offsets[job_index + 1])

    def progress_at(self, job_index: int, elapsed: float) -> tuple[int, int]:
        """Progress of a job ``elapsed`` seconds after it started, in O(log n).

        Returns:
            ``(ionic_step, electronic_step)``: finished ionic steps, and finished
            SCF steps of the ionic step under way (0 when none is under way).
            SCF steps are taken as evenly spaced within their ionic step. At
            the job's run time the result is ``(n_ionic, 0)``.
        """
        lo, hi = self._rows(job_index)
        ends = self.elapsed[lo:hi]
        done = int(np.searchsorted(ends, elapsed, side="right"))
        if done == hi - lo:
            return done, 0
        start = float(self.render["startup"][job_index]) if done == 0 else float(ends[done - 1])
        if elapsed <= start:
            return done, 0
        n_scf = int(self.scf_steps[lo + done])
        frac = (elapsed - start) / (float(ends[done]) - start)
        return done, min(n_scf - 1, int(frac * n_scf))

    def progress_log(self, job_index: int, elapsed: float | None = None) -> dict[str, np.ndarray]:
        """The ionic-step rows finished by ``elapsed`` (all when None), in O(log n).

        Returns:
            ``step`` (int32, from 1), ``elapsed``, ``energy``, ``denergy``,
            ``max_force``, ``scf_steps``: read-only views into the flat arrays
            (``step`` is a new array).
        """
        lo, hi = self._rows(job_index)
        done = hi - lo if elapsed is None else int(
            np.searchsorted(self.elapsed[lo:hi], elapsed, side="right"))
        sl = slice(lo, lo + done)
        return {
            "step": np.arange(1, done + 1, dtype=np.int32),
            "elapsed": self.elapsed[sl],
            "energy": self.energy[sl],
            "denergy": self.denergy[sl],
            "max_force": self.max_force[sl],
            "scf_steps": self.scf_steps[sl],
        }

    def scf_trace(self, job_index: int, elapsed: float) -> np.ndarray:
        """``dE`` (eV) of the SCF lines written so far in the ionic step under way.

        What a reader of the OSZICAR sees after the last ``F=`` line: one value
        per finished SCF step of the step under way (as many as
        :meth:`progress_at` counts), empty when no step is under way.

        Examples:
            >>> jobs = generate_vasp(20, seed=3)
            >>> run = float(jobs.workload.run[0])
            >>> len(jobs.scf_trace(0, 0.5 * run)) == jobs.progress_at(0, 0.5 * run)[1]
            True
        """
        done, partial = self.progress_at(job_index, elapsed)
        if not partial or self.scf_offsets is None:
            return np.zeros(0)
        lo = int(self.scf_offsets[int(self.offsets[job_index]) + done])
        return self.scf_de[lo:lo + partial].astype(np.float64)

    def startup_at(self, job_index: int, elapsed: float) -> float:
        """Seconds from the job's start to its first SCF line, once that line is out (NaN before).

        VASP's initialisation (reading inputs, setting up grids and
        wavefunctions) ends where the first SCF line is written; OUTCAR times
        it, so an observer knows it from then on.
        """
        done, partial = self.progress_at(job_index, elapsed)
        return float(self.render["startup"][job_index]) if done or partial else math.nan

    def oszicar(self, job_index: int, elapsed: float | None = None) -> OszicarRun:
        """The OSZICAR content written by ``elapsed`` (the whole run when None).

        SCF lines are synthesised from a per-job seed, so the same job always
        gives the same lines, and a shorter ``elapsed`` gives a prefix.
        """
        done, partial = (self.progress_at(job_index, elapsed) if elapsed is not None
                         else (int(self.n_ionic[job_index]), 0))
        return _render(self, job_index, done, partial)

    def oszicar_text(self, job_index: int, elapsed: float | None = None) -> str:
        """:meth:`oszicar` rendered with :func:`~cosim.workloads.oszicar.format_oszicar`."""
        return format_oszicar(self.oszicar(job_index, elapsed))


def _render(jobs: VaspJobs, j: int, done: int, partial: int) -> OszicarRun:
    """Build the OSZICAR of job ``j`` with ``done`` ionic steps and ``partial`` SCF lines.

    The ``dE`` column is the stored :attr:`VaspJobs.scf_de`; energies follow
    from it (``E_t = F - dE_{t+1} - ... - dE_n``); the other columns (d eps,
    ncg, rms) are drawn from a per-job seed.
    """
    rd = {k: v[j] for k, v in jobs.render.items()}
    lo = int(jobs.offsets[j])
    n_rows = done + (1 if partial else 0)
    scf = jobs.scf_steps[lo:lo + n_rows].astype(np.int64)
    counts = scf.copy()
    if partial:
        counts[-1] = partial
    ion_u = np.random.default_rng([int(rd["render_seed"]), 0]).random((n_rows, 3))
    el_u = np.random.default_rng([int(rd["render_seed"]), 1]).random((int(counts.sum()), 4))
    kind, algo, ispin = int(rd["kind"]), str(rd["ALGO"]), int(rd["ISPIN"])
    ediff, atoms = float(rd["EDIFF"]), int(rd["atoms"])
    nelmdl = 0 if rd["restart"] else (12 if algo == "VeryFast" and int(rd["ISTART"]) == 0 else 5)
    ionic: list[IonicStep] = []
    trailing: tuple[ElectronicStep, ...] = ()
    pos = 0
    for i in range(n_rows):
        f_i = float(jobs.energy[lo + i])
        n, c = int(scf[i]), int(counts[i])
        u = el_u[pos:pos + c]
        pos += c
        first = i == 0
        a = int(jobs.scf_offsets[lo + i])
        de_all = jobs.scf_de[a:a + n].astype(np.float64)
        # E_t = F - (dE_{t+1} + ... + dE_n): the last line's energy is F
        tail = np.concatenate([np.cumsum(de_all[::-1])[::-1][1:], [0.0]])
        e = (f_i - tail)[:c]
        de = de_all[:c]
        t = np.arange(c)
        err = np.abs(de)
        deps = -(err * (0.05 + u[:, 2]) + ediff * 0.01)
        ncg = (float(rd["ncg_base"]) * (0.7 + 0.6 * u[:, 3])).astype(np.int64)
        rms = np.sqrt(np.minimum(err / max(float(err[0]), 1e-12), 1.0)) \
            * (100.0 if first else 1.0) * (0.5 + u[:, 3])
        if algo in ("Normal", "Other"):
            tags = ["DAV"] * c
        elif algo == "VeryFast":
            tags = ["RMM"] * c
        elif algo == "All":
            tags = ["CGA"] * c
        elif algo == "Damped":
            tags = ["DMP"] * c
        else:  # Fast: Davidson for the non-self-consistent start, then RMM-DIIS
            lead = max(nelmdl, 1) if first else 1
            tags = ["DAV" if s < lead else "RMM" for s in range(c)]
        has_c = (t >= (nelmdl if first else 0)) & (t < n - 1)
        elec = tuple(
            ElectronicStep(tags[s], s + 1, float(e[s]), float(de[s]), float(deps[s]), int(ncg[s]),
                           float(rms[s]), float(rms[s] * (0.5 + u[s, 0])) if has_c[s] else None)
            for s in range(c))
        if i == done:  # the step under way: its SCF lines so far trail the last F= line
            trailing = elec
            break
        iu = ion_u[i]
        e0 = f_i if int(rd["ISMEAR"]) == -5 else f_i + (iu[0] - 0.5) * float(rd["SIGMA"]) * 0.002 * atoms
        mag = (round(float(rd["mag"]) * (1 + 0.01 * (iu[1] - 0.5)), 4),) if ispin == 2 else ()
        md = None
        denergy: float | None = float(jobs.denergy[lo + i])
        if kind == 2:
            ek = float(rd["e_tot"]) - f_i
            md = MdStep(ek / (1.5 * atoms * _KB), float(rd["e_tot"]), ek, 0.0, 0.0)
            denergy = None
        ionic.append(IonicStep(i + 1, f_i, e0, denergy, mag, elec, md))
    return OszicarRun(tuple(ionic), trailing)


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
            close = difflib.get_close_matches(key, names, n=1)
            raise WorkloadError(f"vasp.{key}", "an unknown parameter",
                                f"one of {', '.join(names)}"
                                + (f" (did you mean {close[0]!r}?)" if close else ""))
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
