"""Studies (``python -m cosim sweep``): many runs on Ray, one table, one report.

Many runs means policies x seeds x settings, or training runs.

A study file names a scenario, what to run on it, the seeds and the
settings; every (setting, seed, policy) is one run, and every run is one Ray
task (a local Ray started in this process, or a running cluster with
``--address``)::

    name: study-lublin                     # default: the file's name
    scenario: lublin256.yaml               # relative to the study file
    policies: [fcfs+easy, sjf+easy, f1+conservative]   # default: the scenario's
    seeds: [1, 2, 3, 4, 5]                 # or {start: 1, count: 10}; default: the scenario's seed
    set: {workload.jobs: 2000}             # overrides for every run (as --set)
    grid:                                  # optional: every combination of these values
      workload.estimates.model: [exact, tsafrir]
    metrics: [bsld_mean, wait_mean, utilization]   # the report's columns (summary.json keys)
    confidence: 0.95                       # of the bootstrap intervals
    bootstrap: 9999                        # resamples

A run's seed replaces the scenario's top-level ``seed`` (the generated
workload, estimate noise, faults). A *training* study has ``train:`` instead
of ``policies:``; each run is one ``python -m agents train`` run whose seed is
also the learner's, and ``train.*`` keys can be set and gridded like scenario
keys::

    train:
      algo: ppo                            # or a2c
      env: {window: [8, 2], episode_jobs: 64}              # SchedulingEnv arguments
      args: {total_steps: 20000, num_envs: 2, lr: 0.0003}  # agents.ppo.Args fields
    grid:
      train.args.lr: [0.0001, 0.0003]

The results folder (``--out``, default ``results/<name>``)::

    OUT/study.yaml            the study as resolved (every default filled in)
    OUT/study.parquet         one row per run: setting, policy, seed, every override,
                              status and error, every summary metric (schema study/1)
    OUT/report.json           mean and bootstrap interval per setting, policy and metric
    OUT/report.html, *.png    the tables and the plots across seeds
    OUT/runs/<setting>/seed-<n>/scenario.yaml, comparison.json   (as ``python -m cosim run``)
    OUT/runs/<setting>/seed-<n>/<policy>/jobs.parquet, ..., summary.json, run.json

``run.json`` records each run's status (``pending``, ``ok`` or ``error`` with
its message), the digest of what it ran and its summary. Running the same
study again skips every run whose ``run.json`` says ``ok`` for the same
digest, so an interrupted study finishes only what is missing, and a failed
run is tried again; a changed scenario or override changes the digest and
the run is redone. A run that fails is recorded with its error and does not
stop the others. Every file is written to a temporary name and renamed.

Statistics: the report gives, per setting and policy, each metric's mean over
seeds with a bias-corrected and accelerated (BCa) bootstrap confidence
interval of that mean (``scipy.stats.bootstrap``, seeded, so the report is
reproducible), and the same for each policy's difference to the first policy
paired by seed (the runs of one seed share their workload, so the paired
interval is the sharper test). With fewer than two seeds there is no
interval; with five or fewer, read intervals as rough.

The package: :mod:`~cosim.studies.schema` (the study file),
:mod:`~cosim.studies.plan` (settings x seeds x policies),
:mod:`~cosim.studies.execute` (serial or Ray, resumable),
:mod:`~cosim.studies.stats` (intervals by :func:`cosim.paired.mean_interval`),
:mod:`~cosim.studies.report` (``study.parquet``, ``report.json``, ``report.html``).

Examples:
    >>> plan = plan_study("scenarios/study-lublin.yaml")     # doctest: +SKIP
    >>> len(plan.runs)                                       # doctest: +SKIP
    60
    >>> run_study("scenarios/study-lublin.yaml")             # doctest: +SKIP
"""

from cosim.studies.execute import execute_run, run_study
from cosim.studies.plan import plan_study, validate_study
from cosim.studies.report import study_rows, write_study_report, write_study_table
from cosim.studies.schema import (
    DEFAULT_METRICS,
    TRAIN_METRICS,
    RunSpec,
    SeedRange,
    Study,
    StudyPlan,
    TrainSpec,
    is_study,
    load_study,
)
from cosim.studies.stats import summarize_study

__all__ = ["Study", "SeedRange", "TrainSpec", "RunSpec", "StudyPlan", "load_study",
           "is_study", "validate_study", "plan_study", "run_study", "execute_run",
           "study_rows", "write_study_table", "summarize_study", "write_study_report",
           "DEFAULT_METRICS", "TRAIN_METRICS"]
