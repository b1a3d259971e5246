"""The generator's result: :class:`VaspJobs` (workload, features, trajectories, OSZICARs).

Trajectories are stored flat (CSR style); SCF lines are synthesised on demand
from a per-job seed (:meth:`VaspJobs.oszicar_text`). Re-exported by
:mod:`cosim.workloads.vasp`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cosim.workloads.base import Workload
from cosim.workloads.oszicar import (
    ElectronicStep,
    IonicStep,
    MdStep,
    OszicarRun,
    format_oszicar,
)
from cosim.workloads.vasp_params import _KB, VaspParams

__all__ = ["VaspJobs"]

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
