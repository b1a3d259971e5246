"""End-to-end tests of ``python -m predictors`` (generate, ingest, train, evaluate)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from predictors.__main__ import main
from predictors.dataset import generate_dataset

REPO = Path(__file__).resolve().parents[1]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "predictors", *map(str, args)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Generate, train all three models and evaluate, through the CLI."""
    root = tmp_path_factory.mktemp("cli")
    data, models = root / "data", root / "models"
    r = run_cli("generate", "--jobs", 400, "--seed", 3, "--out", data)
    assert r.returncode == 0, r.stderr
    assert "wrote 400 jobs" in r.stdout
    generate_dataset(150, 4, root / "test")
    for kind in ("runtime", "history"):  # in-process: a subprocess costs seconds of imports
        assert main(["train", kind, "--data", str(data), "--out", str(models)]) == 0
    r = run_cli("train", "remaining", "--data", data, "--out", models, "--epochs", 1,
                "--seed", 5)
    assert r.returncode == 0, r.stderr
    r = run_cli("evaluate", "--data", root / "test", "--models", models, "--json",
                root / "eval.json")
    assert r.returncode == 0, r.stderr
    return {"root": root, "data": data, "models": models, "stdout": r.stdout,
            "result": json.loads((root / "eval.json").read_text())}


def test_generate_draws_one_centre_unless_told(trained, tmp_path):
    # --seed is a job stream of the default centre (42): a held-out seed is the
    # same centre's future; --population-seed picks another centre
    meta = json.loads((trained["data"] / "dataset.json").read_text())
    assert meta["seed"] == 3 and meta["population_seed"] == 42
    assert main(["generate", "--jobs", "5", "--seed", "4", "--population-seed", "7",
                 "--out", str(tmp_path / "other")]) == 0
    assert json.loads((tmp_path / "other" / "dataset.json").read_text())["population_seed"] == 7


def test_train_writes_one_folder_per_model(trained):
    models = trained["models"]
    assert sorted(p.name for p in models.iterdir()) == ["history", "remaining", "runtime"]
    meta = json.loads((models / "remaining" / "meta.json").read_text())
    assert meta["params"]["epochs"] == 1 and meta["params"]["random_state"] == 5
    assert meta["extra"]["n_jobs"] == 400 and meta["extra"]["data"] == str(trained["data"])
    assert "SystemVolume" in meta["feature_names"]


def test_evaluate_table_and_json(trained):
    res = trained["result"]
    assert res["unit"] == "percent"
    assert res["n_jobs"] == 150 and res["n_single"] + res["n_multi"] == 150
    assert set(res["runtime"]) == {"user_estimate", "user_history", "xgboost"}
    for block in res["runtime"].values():
        assert set(block) == {"overall", "single", "multi"}
        assert block["overall"]["n"] == 150 and block["overall"]["mape"] > 0
    rem = res["remaining"]
    assert rem["unit"] == "percent"
    assert rem["fractions"] == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    names = {"model", "model_ionic", "zero", "estimate", "prerun", "extrapolation"}
    assert set(rem["predictors"]) == names and set(rem["by_fraction"]) == names
    for name in names:
        for part in ("overall", "single", "multi"):
            assert len(rem["by_fraction"][name][part]) == 9
        assert rem["pooled"][name]["n"] == 9 * 150
    # remaining = 0 implies the elapsed time as the run time: its MAPE is 100 (1 - f) percent
    np.testing.assert_allclose(rem["by_fraction"]["zero"]["overall"],
                               [100 * (1 - f) for f in rem["fractions"]], rtol=1e-9)
    assert rem["pooled"]["zero"]["overall"] == pytest.approx(50.0)
    out = trained["stdout"]
    assert "all errors in percent" in out and "Remaining time by elapsed fraction" in out
    # the table prints the same numbers as the JSON (percent, one decimal)
    row50 = next(line for line in out.splitlines() if line.startswith("50%"))
    assert row50.split()[1] == f"{rem['by_fraction']['model']['overall'][4]:.1f}"
    assert row50.split()[5] == "50.0"
    assert f"wrote {trained['root'] / 'eval.json'}" in out


def test_same_seed_same_model(trained, tmp_path):
    assert main(["train", "runtime", "--data", str(trained["data"]), "--out", str(tmp_path)]) == 0
    a = (trained["models"] / "runtime" / "model.ubj").read_bytes()
    assert (tmp_path / "runtime" / "model.ubj").read_bytes() == a


def test_user_errors_are_one_line_and_exit_2(trained, tmp_path):
    r = run_cli("evaluate", "--data", tmp_path / "missing", "--models", trained["models"])
    assert r.returncode == 2
    assert r.stderr == (f"error: {tmp_path / 'missing'}: expected a data set folder with "
                        "jobs.parquet, progress.parquet, dataset.json, got no such folder\n")
    assert r.stdout == ""


def test_bad_arguments_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--jobs", "0", "--out", "x"])
    assert exc.value.code == 2
    assert "argument --jobs: expected a positive integer, got '0'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["train", "forest", "--data", "d", "--out", "m"])
    assert exc.value.code == 2
    assert "invalid choice: 'forest'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["train", "runtime", "--data", "d"])
    assert exc.value.code == 2
    assert "the following arguments are required: --out" in capsys.readouterr().err


def test_in_process_errors(trained, tmp_path, capsys):
    empty = tmp_path / "models"
    empty.mkdir()
    assert main(["evaluate", "--data", str(trained["data"]), "--models", str(empty)]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {empty}: expected a folder written by 'python -m predictors "
                   "train', got no runtime/, remaining/ or history/ model folder\n")
    # a model folder of the wrong class where another is expected
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "runtime").symlink_to(trained["models"] / "history", target_is_directory=True)
    assert main(["evaluate", "--data", str(trained["data"]), "--models", str(wrong)]) == 2
    assert "expected a saved RuntimeRegressor, got a saved UserHistoryRegressor" in \
        capsys.readouterr().err


def test_ingest_then_train_without_run_times(tmp_path, capsys, shared):
    src = shared / "vasp" / "hackingmaterials__atomate__atomate__vasp__test_files__Al__OSZICAR.OSZICAR"
    if not src.is_file():
        pytest.skip(f"{src} not found")
    run = tmp_path / "runs" / "al"
    run.mkdir(parents=True)
    (run / "OSZICAR").write_bytes(src.read_bytes())  # into tmp only, never the repo
    (run / "INCAR").write_text("ENCUT = 520\nNSW = 0\n")
    assert main(["ingest", str(tmp_path / "runs"), "--out", str(tmp_path / "data")]) == 0
    assert "ingested 1 of 1" in capsys.readouterr().out
    # without an OUTCAR the run time is unknown: nothing to learn from
    assert main(["train", "runtime", "--data", str(tmp_path / "data"),
                 "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no known run time in 1 jobs" in err
    assert err.count("\n") == 1
    (tmp_path / "nothing").mkdir()
    assert main(["ingest", str(tmp_path / "nothing"), "--out", str(tmp_path / "d2")]) == 2
    assert "expected folders holding VASP runs (INCAR + OSZICAR), got no readable VASP run " \
        "(0 found, nothing written)" in capsys.readouterr().err
    assert not (tmp_path / "d2").exists()   # ingesting nothing writes nothing


def test_output_paths_that_cannot_be_written_are_one_line(trained, tmp_path, capsys):
    """A folder where a file goes and a file where a folder goes: one line, exit 2, and no
    temporary file left (the check runs before any work)."""
    folder, file = tmp_path / "adir", tmp_path / "afile"
    folder.mkdir()
    file.write_text("keep me")
    cases = [
        (["evaluate", "--data", str(trained["data"]), "--models", str(trained["models"]),
          "--json", str(folder)], f"error: {folder}: expected a file path for the JSON result, "
         "got a folder\n"),
        (["evaluate", "--data", str(trained["data"]), "--models", str(trained["models"]),
          "--json", str(file / "eval.json")], f"error: {file / 'eval.json'}: expected a file "
         f"path for the JSON result, got a path under the file {file}\n"),
        (["generate", "--jobs", "5", "--out", str(file)],
         f"error: {file}: expected a folder for the data set (new or existing), got a file\n"),
        (["generate", "--jobs", "5", "--out", str(file / "sub")],
         f"error: {file / 'sub'}: expected a folder for the data set (new or existing), got a "
         f"path under the file {file}\n"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        assert captured.err == message
        assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile"]
        assert list(folder.iterdir()) == [] and file.read_text() == "keep me"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_json_result_nowhere_writable_is_refused_before_the_evaluation(trained, capsys):
    # /proc takes no new file: the evaluation ran, printed its table, then failed
    assert main(["evaluate", "--data", str(trained["data"]), "--models", str(trained["models"]),
                 "--json", "/proc/eval.json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: /proc/eval.json: expected a file path for the JSON "
                                   "result, got a folder this user cannot write in (/proc: ")


def test_write_json_into_a_folder_leaves_no_temporary_file(tmp_path):
    from cosim.errors import InputError
    from predictors.evaluate import write_json

    with pytest.raises(InputError, match="got a folder$"):
        write_json({"a": 1}, tmp_path)
    assert list(tmp_path.parent.glob(f".{tmp_path.name}.tmp-*")) == []


def test_generate_refuses_more_jobs_than_memory_before_allocating(tmp_path, capsys, monkeypatch):
    import predictors.dataset as dataset

    monkeypatch.setattr(dataset, "available_memory", lambda: 2**30)
    # 2**30 // 48,000 bytes a job = 22,369 jobs; 100,000 jobs need 4.47 GiB
    assert main(["generate", "--jobs", "100000", "--out", str(tmp_path / "d")]) == 2
    assert capsys.readouterr().err == (
        "error: --jobs: expected at most 22,369 jobs on this machine (1.0 GiB available), "
        "got 100000 jobs (about 4.5 GiB to generate)\n")
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("argv, message", [
    (["--jobs", "100000000000"], "error: --jobs: expected at most "),
    (["--jobs", "1e11"], "argument --jobs: expected a positive integer, got '1e11'"),
    (["--jobs", "5", "--seed", "-3"], "argument --seed: expected an integer >= 0, got '-3'"),
])
def test_generate_sizes_and_seeds_are_one_line_exit_2(tmp_path, argv, message):
    """Through the real CLI (no patched memory): 1e11 jobs would need 4.5 PB."""
    r = run_cli("generate", *argv, "--out", tmp_path / "d")
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and len(r.stderr.strip().splitlines()) <= 2
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, message", [
    # XGBoost stores its seed as an int64: 2**63 raised XGBoostError with a traceback
    (["train", "runtime", "--data", "d", "--out", "m", "--seed", str(2**63)],
     f"argument --seed: expected an integer in 0..2**63-1, got '{2**63}'"),
    (["train", "runtime", "--data", "d", "--out", "m", "--threads", "100000"],
     "argument --threads: expected at most 1024 threads, got '100000'"),
    # 0 epochs "trained" a network that never saw the data
    (["train", "remaining", "--data", "d", "--out", "m", "--model", "gru", "--epochs", "0"],
     "argument --epochs: expected a positive integer, got '0'"),
    # Path("") is the working folder: the data set was written into it
    (["generate", "--jobs", "5", "--out", ""], "argument --out: expected a path, got an empty one"),
    (["train", "runtime", "--data", "d", "--out", " "],
     "argument --out: expected a path, got an empty one"),
])
def test_out_of_range_options_are_one_line_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(message), err
