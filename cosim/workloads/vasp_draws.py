"""Random draws of the VASP generator: users, templates, jobs, ionic steps, SCF lines.

Each function draws one layer of the model described in
:mod:`cosim.workloads.vasp` from a numpy generator, vectorised over jobs;
:func:`cosim.workloads.vasp.generate_vasp` calls them in order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cosim.workloads.vasp_params import _KB, _NODES_PER_GROUP, EXHOST_GROUPS, VaspParams

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
