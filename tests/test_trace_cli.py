"""python -m predictors dataset --trace / train trace / evaluate on a trace's future."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cosim.workloads.base import Workload
from cosim.workloads.swf import write_swf
from predictors.__main__ import main


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    rng = np.random.default_rng(5)
    n = 500
    user = rng.integers(0, 6, n)
    req = rng.choice([600.0, 3600.0, 7200.0], n)
    run = np.minimum(req, np.round(req * (0.1 + 0.12 * user) * rng.uniform(0.8, 1.2, n)))
    w = Workload.from_columns(submit=np.sort(rng.uniform(0, 40 * n, n)).round(), run=run,
                              procs=rng.integers(1, 8, n), req_time=req, user=user,
                              features={"queue": rng.integers(1, 3, n)}, max_procs=64)
    w.epoch, w.timezone = 893466664.0, "US/Pacific"
    return write_swf(w, tmp_path_factory.mktemp("trace") / "t.swf")


def test_dataset_train_evaluate_on_the_future(trace, tmp_path, capsys):
    data, models = tmp_path / "data", tmp_path / "models"
    assert main(["dataset", "--trace", str(trace), "--out", str(data), "--split", "0.6"]) == 0
    captured = capsys.readouterr()
    assert "wrote 500 jobs" in captured.out and "(300 past, 200 future)" in captured.out
    assert "no group, executable, partition in the trace" in captured.err
    meta = json.loads((data / "dataset.json").read_text())
    assert meta["kind"] == "trace" and meta["n_past"] == 300 and "queue" in meta["categorical"]
    assert main(["train", "trace", "--data", str(data), "--out", str(models)]) == 0
    assert "trained trace on 300 past jobs" in capsys.readouterr().out
    assert (models / "trace" / "model.ubj").is_file()
    assert main(["evaluate", "--data", str(data), "--models", str(models),
                 "--json", str(tmp_path / "e.json")]) == 0
    out = capsys.readouterr().out
    assert "future of" in out and "200 jobs" in out and "by run-time decile" in out
    result = json.loads((tmp_path / "e.json").read_text())
    overall = result["overall"]
    assert set(overall) == {"model", "request", "last_two", "user_mean"}
    assert all(e["n"] == 200 for e in overall.values())
    assert sum(row["model"]["n"] for row in result["deciles"]) == 200
    assert overall["model"]["mae"] < 0.5 * overall["request"]["mae"]


@pytest.mark.parametrize("args, message", [
    (["dataset", "--trace", "nope.swf", "--out", "{tmp}/d"],
     "nope.swf: expected an SWF trace or sacct --parsable2 output, got no such file"),
    (["dataset", "--trace", "{trace}", "--out", "{tmp}/d", "--split", "1.5"],
     "expected a share between 0 and 1, got '1.5'"),
    (["dataset", "--trace", "{trace}", "--out", "{tmp}/d", "--kind", "pbs"], "invalid choice"),
    (["train", "trace", "--data", "{tmp}", "--out", "{tmp}/m"], "no trace data set there"),
])
def test_bad_input_is_one_line_and_exit_2(trace, tmp_path, capsys, args, message):
    args = [a.format(tmp=tmp_path, trace=trace) for a in args]
    try:
        code = main(args)
    except SystemExit as exc:     # a usage error, from argparse
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "d").exists()


def test_evaluate_without_a_trace_model_says_so(trace, tmp_path, capsys):
    assert main(["dataset", "--trace", str(trace), "--out", str(tmp_path / "d")]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--data", str(tmp_path / "d"), "--models", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no trace/ model folder" in err
