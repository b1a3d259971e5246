"""predictors.training: the library function behind ``train`` and ``ensure_models``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cosim.errors import InputError
from predictors.__main__ import main
from predictors.dataset import generate_dataset
from predictors.training import TrainedModel, train_model

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return generate_dataset(120, 2, tmp_path_factory.mktemp("training") / "data")


def test_train_model_writes_what_the_cli_writes(data, tmp_path):
    result = train_model("runtime", data, tmp_path / "lib", seed=3)
    assert isinstance(result, TrainedModel)
    assert result.kind == "runtime" and result.n_jobs == 120
    assert result.folder == tmp_path / "lib" / "runtime" and result.seconds >= 0
    assert str(result).startswith("trained runtime on 120 jobs in ")
    assert str(result).endswith(f" s -> {tmp_path / 'lib' / 'runtime'}")
    assert main(["train", "runtime", "--data", str(data), "--out", str(tmp_path / "cli"),
                 "--seed", "3"]) == 0
    assert (tmp_path / "lib" / "runtime" / "model.ubj").read_bytes() == \
        (tmp_path / "cli" / "runtime" / "model.ubj").read_bytes()
    meta = json.loads((result.folder / "meta.json").read_text())
    assert meta["extra"]["data"] == str(data) and meta["extra"]["n_jobs"] == 120
    assert meta["params"]["random_state"] == 3 and meta["params"]["n_jobs"] == 1


def test_remaining_reuses_the_saved_prerun_model(data, tmp_path):
    train_model("runtime", data, tmp_path, seed=1)
    result = train_model("remaining", data, tmp_path, seed=1, epochs=1, rnn="lstm",
                         model="gru")
    assert (tmp_path / "remaining" / "runtime" / "model.ubj").read_bytes() == \
        (tmp_path / "runtime" / "model.ubj").read_bytes()
    params = json.loads((result.folder / "meta.json").read_text())["params"]
    assert (params["epochs"], params["rnn"], params["model"]) == (1, "lstm", "gru")
    assert "NSW" in params["feature_names"]
    # the default is the boosted trees
    gbm = train_model("remaining", data, tmp_path / "gbm", seed=1)
    assert (gbm.folder / "remaining.ubj").is_file()
    # without runtime/ it trains its own pre-run model
    alone = train_model("remaining", data, tmp_path / "alone", seed=1, epochs=0)
    assert (alone.folder / "runtime" / "model.ubj").is_file()
    assert not (tmp_path / "alone" / "runtime").exists()


def test_a_prerun_model_on_other_features_is_refused(data, tmp_path, capsys):
    train_model("runtime", data, tmp_path)
    meta_path = tmp_path / "runtime" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["feature_spec"] = {"numeric": ["x"], "categorical": [], "extra": []}
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(InputError, match=r"runtime/meta.json: expected the features of .*"
                                         r"retrain it with 'train runtime', got a pre-run "
                                         r"model on features \['x'\]$"):
        train_model("remaining", data, tmp_path, epochs=0)
    assert main(["train", "remaining", "--data", str(data), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert not (tmp_path / "remaining").exists()


def test_unknown_kind(data, tmp_path):
    with pytest.raises(InputError, match="kind: expected one of runtime, remaining, history"):
        train_model("forest", data, tmp_path)


def test_cli_errors_are_one_line_and_ctrl_c_is_130(monkeypatch, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", "forest", "--data", "d", "--out", "m"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m predictors train: error: argument kind: invalid choice")
    assert err.count("\n") == 1

    def interrupted(args):
        raise KeyboardInterrupt

    import predictors.__main__ as cli

    monkeypatch.setitem(cli._HANDLERS, "generate", interrupted)
    assert main(["generate", "--jobs", "1", "--out", "x"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_ensure_models_trains_without_the_cli(tmp_path):
    code = ("import sys; from predictors.bundle import ensure_models; "
            f"lines = []; folder = ensure_models({str(tmp_path)!r}, jobs=80, seed=1, "
            "remaining=True, epochs=1, echo=lines.append); "
            "print('predictors.__main__' in sys.modules); print(sorted(p.name for p in "
            "folder.iterdir())); print(*lines, sep='\\n')")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "False", "ensure_models must not import the CLI"
    assert lines[1] == "['remaining', 'runtime']"
    assert lines[2].startswith("training predictors on 80 generated VASP jobs")
    assert lines[3].startswith("  runtime model trained in ")
    assert lines[4].startswith("  remaining model trained in ")
    # the folder named is the cached one, never the temporary one the models were trained in
    folder = next(p for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert lines[5].startswith(f"predictors: {folder} (runtime and remaining, trained in ")
    assert all(str(folder) + "." not in ln and "/." not in ln for ln in lines[2:])


def test_a_remaining_model_on_one_run_is_one_clear_line(tmp_path):
    # One ingested run is one job: its validation split raised ValueError in the fit.
    from predictors.training import train_model

    generate_dataset(1, 3, tmp_path / "one")
    with pytest.raises(InputError, match=r"one: expected at least 2 for a remaining-time "
                                         r"model, got 1 job with a known run time"):
        train_model("remaining", tmp_path / "one", tmp_path / "m", epochs=1)
    assert not (tmp_path / "m" / "remaining").exists()


def test_ensure_models_started_together_trains_once(tmp_path):
    code = ("from predictors.bundle import ensure_models; "
            f"ensure_models({str(tmp_path)!r}, jobs=80, seed=1, remaining=False, epochs=1)")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    said = "".join(o for o, _ in outs)
    assert said.count("training predictors on 80") == 1 and said.count("(cached)") == 1

