"""``python -m agents tune``: search a priority policy on a workload's past, test it on its future.

The operator's question: given my cluster's history, is there a policy that
would have done better than the best classic heuristic with EASY on what
came after? The command answers it with :mod:`cosim.evaluation`:

1. The workload is cut in time order (``--split 0.5 0.7``: train on the
   first half, validate on the next 20 %, test on the last 30 %).
2. The classic heuristics (FCFS, SJF, SAF, F1, WFP3, UNICEF, with EASY) run
   on the validation windows; the best of them is the reference.
3. CMA-ES (the ``cma`` package) searches the weights of
   :mod:`cosim.policies.priority` (log estimate, log cores, log wait, their
   product, wait/estimate, F1's area term; log submit time only with
   ``--with-submit-time``, since absolute time is not stationary and a
   weight on it learned on the past is another policy on the future; the
   user-history prediction and accuracy of Tsafrir et al. where the trace
   names its users and their requests are loose, ``--user-features auto``,
   computed once on the whole workload; with ``--backlog searched`` three
   products of the queue's backlog with log estimate, cores and wait), with
   EASY backfilling in the same order, starting from the best heuristic's
   point of that space. Fitness: the candidate's mean bsld over the best
   heuristic's, on paired training windows, evaluated in worker processes.
   Contention filtering (``--train-filter``, default ``skip``): windows
   where every heuristic is within 5 % of the best say nothing to the
   search, so each such evenly spaced training window is replaced by the
   window of widest heuristic spread from a pool ``--train-pool`` times
   larger (``spread``: the most contended windows of the pool, ``none``:
   no filtering). ``--train-batch K`` scores each generation on K of the
   training windows drawn afresh (paired within the generation), a
   minibatch against fitting a fixed few windows. It runs until
   ``--minutes`` are spent.
4. Selection on validation only: the best few searched policies, the
   search distribution's mean and the classic heuristics themselves
   compete, so on validation the result is never worse than the best
   heuristic. A searched policy must also beat the best heuristic on
   validation with its 95 % paired bootstrap interval below 1
   (``--selection interval``; where validation windows overlap, the
   bootstrap resamples blocks of windows that share jobs, so the interval
   reflects the span's independent evidence): small validation gains did not survive the
   test span (a 1.8 % gain on validation became +11.6 % on test on an
   unseen Lublin trace), so the heuristic stays unless the evidence is clear.
   It must also do no worse than the best heuristic when the whole
   validation span is run through at once: windows start from an empty
   machine, and a policy shipped on window evidence for RICC had 2.4x
   F1+EASY's mean bsld over its validation span run whole. With
   ``--selection past`` (the default) it must also do no worse than the
   best heuristic in every one of ``--folds`` periods of the training span:
   a policy fitted to the past that still loses somewhere in it is a
   validation fluke more often than not (:func:`agents.tuning.select.past_check`).
   Where none qualifies, the best heuristic on validation is kept; with
   ``--fallback median`` the heuristic kept is chosen on the whole past
   instead: the lowest median, over the training periods and validation,
   of its ratio to each period's best heuristic
   (:func:`agents.tuning.select.fallback_heuristic`).
   ``--selection minimax`` instead fits the whole past: the search's fitness
   is a candidate's worst ratio to the best heuristic over the training
   chunks and the validation span (every one run for every candidate,
   the heuristic's own point first; where F1+EASY leads, F1's submit-time
   term joins the space so that point is F1+EASY itself), and the best
   point ships only if that ratio is below ``--margin``, or rather the
   smallest step toward it from the heuristic's point (a quarter, half,
   three quarters of the way) whose ratio is; validation is then fitted,
   not held out, and only the margin stands between a fluke and the future.
5. The test windows are read once, after selection: the chosen policy and
   every heuristic run on them; ratios to the best heuristic with 95 %
   bootstrap intervals, wins and losses, max wait against FCFS+EASY, the
   test span run whole, and the room in hindsight (the heuristic best on
   the test span, and each window given the heuristic best on it).

``--evaluation running`` measures every policy the way a cluster runs it:
the validation and test spans are each simulated in one run (after
``--warmup`` jobs of the past), their windows are the jobs measured inside
that run, and the search is scored on ``--train-windows`` (default 4) long
chunks of the training span, each run whole; the contention filter is off.
The bootstrap resamples blocks of consecutive windows, since one window's
backlog carries into the next.

Options beyond the defaults: ``python -m agents tune --help``; measured in docs/results/tuning.md.
The output folder runs as ``--policy learned:DIR``: ``policy.json``, ``card.md`` (the
model card: data, spans, budget, search space, validation and test figures against every
heuristic) and ``results.json``, written whole or not at all.

The package: :mod:`~agents.tuning.options` (the options and defaults),
:mod:`~agents.tuning.space` (what a candidate is, the fitness),
:mod:`~agents.tuning.search` (CMA-ES on the training span),
:mod:`~agents.tuning.select` (selection on validation and the past),
:mod:`~agents.tuning.report` (the test figures, ``results.json``),
:mod:`~agents.tuning.card` (the model card, the folder),
:mod:`~agents.tuning.run` (:func:`tune`: all of it over one
:class:`cosim.evaluation.Protocol`), :mod:`~agents.tuning.cli` (the command line).
"""

from agents.tuning.options import (
    EVALUATION,
    SELECTION,
    SELECTIONS,
    TRAIN_CHUNKS,
    TRAIN_FILTER,
    TRAIN_POOL,
    TRAIN_WINDOWS,
    Options,
)
from agents.tuning.run import prepare, tune
from agents.tuning.slurm import select_slurm
from agents.tuning.space import FITNESS, FOLDS

__all__ = ["tune", "prepare", "select_slurm", "Options", "EVALUATION", "FITNESS", "FOLDS", "TRAIN_CHUNKS", "TRAIN_FILTER",
           "TRAIN_POOL", "TRAIN_WINDOWS", "SELECTION", "SELECTIONS"]
