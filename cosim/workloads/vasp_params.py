"""The synthetic VASP centre's vocabulary and parameters.

Feature names and categories (RLSchert's Table 1), job kinds, walltimes,
node groups, and :class:`VaspParams`, the knobs of
:func:`cosim.workloads.vasp.generate_vasp` (the model is described in
:mod:`cosim.workloads.vasp`, which re-exports these names).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FEATURES", "CATEGORICAL", "KINDS", "WALLTIMES", "EXHOST_GROUPS", "VaspParams"]

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
