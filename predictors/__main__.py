"""Command line of the predictors: generate or ingest data, train, evaluate.

Usage::

    python -m predictors generate --jobs 20000 --seed 1 --out data/vasp20k
    python -m predictors generate --jobs 5000 --seed 31337 --out data/heldout
    python -m predictors ingest RUN_DIR... --out data/mycentre
    python -m predictors train runtime   --data data/vasp20k --out models/vasp
    python -m predictors train remaining --data data/vasp20k --out models/vasp
    python -m predictors train history   --data data/vasp20k --out models/vasp
    python -m predictors evaluate --data data/heldout --models models/vasp --json eval.json
    python -m predictors serve --models models/vasp --port 8080 [--token T]
    python -m predictors dataset --trace SDSC-SP2.swf.gz --out data/sdsc [--split 0.7]
    python -m predictors train trace --data data/sdsc --out models/sdsc
    python -m predictors evaluate --data data/sdsc --models models/sdsc

``train KIND`` writes ``MODELDIR/KIND/`` (``runtime/``, ``remaining/``,
``history/``), each a folder :func:`predictors.persist.save` wrote;
``train remaining`` reuses ``MODELDIR/runtime/`` as its pre-run model when
it exists. ``evaluate`` scores every model it finds there. ``dataset --trace``
turns an SWF trace or sacct output into a data set split by submit time
(:mod:`predictors.trace_dataset`); ``train trace`` fits the trace model on its
past and ``evaluate`` on such a set scores it and the baselines on its future. ``serve`` answers
prediction batches over HTTP (:mod:`predictors.server`) until SIGTERM. User errors print
one ``error: ...`` line to stderr and exit with code 2, Ctrl-C exits with 130
(:mod:`cosim.cli`). ``train`` is :func:`predictors.training.train_model`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cosim.cli import ArgumentParser, run_command
from cosim.errors import InputError
from predictors.training import MODEL_KINDS, train_model

__all__ = ["main", "build_parser", "DEFAULT_POPULATION"]

#: The synthetic centre ``generate`` draws jobs from unless told otherwise: the one
#: ``scenarios/vasp.yaml`` simulates, so models trained from the CLI fit it.
DEFAULT_POPULATION = 42


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port 0-65535, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0-65535, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _seed(text: str) -> int:
    """A seed XGBoost takes too (it stores an int64): 0 .. 2**63 - 1."""
    value = _non_negative_int(text)
    if value >= 2**63:
        raise argparse.ArgumentTypeError(f"expected an integer in 0..2**63-1, got {text!r}")
    return value


def _threads(text: str) -> int:
    # a bound, so that a typo does not start a hundred thousand threads (or overflow)
    value = _positive_int(text)
    if value > 1024:
        raise argparse.ArgumentTypeError(f"expected at most 1024 threads, got {text!r}")
    return value


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a share between 0 and 1, got {text!r}")
    return value


def _out(text: str) -> Path:
    # Path("") is ".": an empty --out wrote the data set into the working folder
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty one")
    return Path(text)


def build_parser() -> ArgumentParser:
    """The argument parser of ``python -m predictors`` (usage errors: one line, exit 2)."""
    parser = ArgumentParser(
        prog="python -m predictors",
        description="Run-time and remaining-time predictors for HPC jobs.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    g = sub.add_parser("generate", help="write a synthetic VASP dataset")
    g.add_argument("--jobs", type=_positive_int, required=True, help="number of jobs")
    g.add_argument("--seed", type=_seed, default=0,
                   help="seed of the job stream (default 0)")
    g.add_argument("--population-seed", type=_seed, default=DEFAULT_POPULATION,
                   help="seed of the centre: its users, project templates and hidden speed "
                        f"factors (default {DEFAULT_POPULATION}, the centre of "
                        "scenarios/vasp.yaml); two seeds with one population are one centre's "
                        "past and future")
    g.add_argument("--out", type=_out, required=True, help="dataset folder to write")

    i = sub.add_parser("ingest", help="build a dataset from real VASP run folders")
    i.add_argument("dirs", nargs="+", type=Path, help="run folders (INCAR + OSZICAR)")
    i.add_argument("--out", type=_out, required=True, help="dataset folder to write")

    d = sub.add_parser("dataset", help="turn a real trace into a data set: past and future")
    d.add_argument("--trace", type=Path, required=True, help="SWF trace (.swf, .swf.gz) or "
                   "sacct --parsable2 output")
    d.add_argument("--kind", choices=("swf", "slurm"), default=None,
                   help="the trace's format (default: sacct when its first line has a '|')")
    d.add_argument("--out", type=_out, required=True, help="dataset folder to write")
    d.add_argument("--split", type=_share, default=0.7,
                   help="share of the jobs, by submit time, that is the past to fit on "
                        "(default 0.7); the rest is the future to evaluate on")

    t = sub.add_parser("train", help="train one model and save it in MODELDIR/KIND/")
    t.add_argument("kind", choices=(*MODEL_KINDS, "trace"))
    t.add_argument("--data", type=Path, required=True, help="dataset folder")
    t.add_argument("--out", type=_out, required=True, help="model folder (MODELDIR)")
    t.add_argument("--seed", type=_seed, default=0, help="random seed")
    t.add_argument("--threads", type=_threads, default=1,
                   help="CPU threads for XGBoost / torch (default 1)")
    t.add_argument("--model", choices=("gbm", "gru"), default="gbm",
                   help="remaining: boosted trees over progress features (default) or a "
                        "recurrent network")
    t.add_argument("--epochs", type=_positive_int, default=None,
                   help="remaining --model gru: training epochs (default: the model's)")
    t.add_argument("--rnn", choices=("gru", "lstm"), default="gru",
                   help="remaining --model gru: RNN cell")

    e = sub.add_parser("evaluate", help="score the models of MODELDIR on a dataset")
    e.add_argument("--data", type=Path, required=True, help="held-out dataset folder")
    e.add_argument("--models", type=Path, required=True, help="MODELDIR written by train")
    e.add_argument("--json", type=_out, default=None, help="also write the result here")

    s = sub.add_parser("serve", help="answer prediction batches over HTTP until SIGTERM")
    s.add_argument("--models", type=Path, required=True, help="MODELDIR written by train")
    s.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=_port, default=8080, help="TCP port, 0 for any free one "
                   "(default 8080)")
    s.add_argument("--token", default=None,
                   help="require 'Authorization: Bearer TOKEN' on every request")
    s.add_argument("--max-body-mb", type=_positive_float, default=64.0,
                   help="largest request body in MiB, at most 1024; bigger ones get 413 "
                   "(default 64)")
    s.add_argument("--max-concurrency", type=_positive_int, default=8,
                   help="prediction requests in progress at once (default 8)")
    s.add_argument("--queue-timeout", type=_positive_float, default=5.0,
                   help="seconds an excess request waits for a slot before 503 (default 5)")
    s.add_argument("--body-timeout", type=_positive_float, default=10.0,
                   help="seconds a client may take to send its request body before 408 "
                   "(default 10)")
    s.add_argument("--header-timeout", type=_positive_float, default=20.0,
                   help="seconds a connection may stay open without a complete request line "
                   "and headers, idle keep-alive included, before it is closed (default 20)")
    return parser


def _generate(args: argparse.Namespace) -> None:
    from predictors.dataset import generate_dataset

    out = generate_dataset(args.jobs, args.seed, args.out, population_seed=args.population_seed)
    print(f"wrote {args.jobs} jobs of centre {args.population_seed} to {out}")


def _ingest(args: argparse.Namespace) -> None:
    from predictors.ingest import ingest_runs

    report = ingest_runs(args.dirs, args.out)
    print(report)
    if report.n_ingested == 0:
        # nothing was written: an empty data set would only fail later, in train
        raise InputError(" ".join(str(d) for d in args.dirs),
                         f"no readable VASP run ({report.n_found} found, nothing written)",
                         "folders holding VASP runs (INCAR + OSZICAR)")


def _dataset(args: argparse.Namespace) -> None:
    from cosim.cli import stderr_line
    from cosim.workloads.loading import workload_warnings
    from predictors.trace_dataset import read_trace, write_trace_dataset

    workload = read_trace(args.trace, args.kind)
    for line in workload_warnings(workload):
        stderr_line(f"warning: {line}")
    out = write_trace_dataset(workload, args.out, split=args.split, trace_path=args.trace,
                              trace_kind=args.kind or "")
    n_past = int(round(len(workload) * args.split))
    print(f"wrote {len(workload)} jobs of {args.trace} to {out} ({n_past} past, "
          f"{len(workload) - n_past} future)")


def _train(args: argparse.Namespace) -> None:
    if args.kind == "trace":
        from predictors.trace_dataset import train_trace

        print(train_trace(args.data, args.out, seed=args.seed, threads=args.threads))
        return
    print(train_model(args.kind, args.data, args.out, seed=args.seed, threads=args.threads,
                      epochs=args.epochs, rnn=args.rnn, model=args.model))


def _evaluate(args: argparse.Namespace) -> None:
    from predictors.evaluate import check_output_file, evaluate_dir, format_table, write_json
    from predictors.trace_dataset import evaluate_trace, format_trace_table, is_trace_dataset

    if args.json is not None:
        check_output_file(args.json)   # before the evaluation, not after
    if is_trace_dataset(args.data):
        result = evaluate_trace(args.data, args.models)
        print(format_trace_table(result))
    else:
        result = evaluate_dir(args.data, args.models)
        print(format_table(result))
    if args.json is not None:
        write_json(result, args.json)
        print(f"\nwrote {args.json}")


def _serve(args: argparse.Namespace) -> None:
    from predictors.server import serve

    serve(args.models, host=args.host, port=args.port, token=args.token,
          max_body_mb=args.max_body_mb, max_concurrency=args.max_concurrency,
          queue_timeout_s=args.queue_timeout, body_timeout_s=args.body_timeout,
          header_timeout_s=args.header_timeout)


_HANDLERS = {"generate": _generate, "ingest": _ingest, "dataset": _dataset, "train": _train,
             "evaluate": _evaluate, "serve": _serve}


def _run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    _HANDLERS[args.command](args)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (2 for user errors, 130 on Ctrl-C)."""
    return run_command(_run, argv)


if __name__ == "__main__":
    sys.exit(main())
