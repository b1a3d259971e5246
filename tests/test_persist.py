"""Tests of predictors.persist: safe, atomic save/load with clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.exceptions import NotFittedError

from cosim.errors import InputError
from predictors.history import UserHistoryRegressor
from predictors.persist import FORMAT, META, load, read_meta, save
from predictors.remaining import Progress, RemainingTimeRegressor
from predictors.runtime import FeatureSpec, RuntimeRegressor

SPEC = FeatureSpec(numeric=("x", "steps"), categorical={"kind": ("a", "b")}, extra=())


def _data(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(1, 3, n), rng.integers(2, 8, n), rng.integers(0, 3, n)])
    dur = 10 * X[:, 0] * rng.lognormal(0, 0.3, n)
    logs = [np.column_stack([np.arange(1, s + 1) * d, -0.1 * np.ones(int(s)),
                             0.5 * 0.7 ** np.arange(int(s)), 6 * np.ones(int(s))])
            for s, d in zip(X[:, 1].astype(int), dur, strict=True)]
    return X, Progress.from_arrays(logs), X[:, 1] * dur + 3


@pytest.fixture(scope="module")
def models():
    X, p, y = _data()
    rt = RuntimeRegressor(n_estimators=20).fit(X, y)
    rem = RemainingTimeRegressor(n_estimators=20, runtime_model=rt, categorical_columns={2: 3},
                                 stack_folds=2).fit(X, p, y)
    gru = RemainingTimeRegressor(model="gru", epochs=2, hidden_size=8, mlp_hidden=8,
                                 runtime_model=rt, categorical_columns={2: 3},
                                 stack_folds=2).fit(X, p, y)
    jobs = {"user": ["u", "v", "u", "u"], "submit": [0.0, 1, 2, 3],
            "runtime": [10.0, 20, 30, 40], "req_time": [50.0, 50, 50, 50]}
    hist = UserHistoryRegressor().fit(jobs)
    return {"runtime": rt, "remaining": rem, "remaining_gru": gru, "history": hist, "X": X,
            "p": p, "y": y, "jobs": jobs}


def test_round_trips_give_identical_predictions(models, tmp_path):
    X, p, y = models["X"], models["p"], models["y"]
    rt = load(save(models["runtime"], tmp_path / "runtime", feature_spec=SPEC))
    np.testing.assert_array_equal(rt.predict(X), models["runtime"].predict(X))
    assert rt.get_params() == models["runtime"].get_params()
    for kind in ("remaining", "remaining_gru"):
        rem = RemainingTimeRegressor.load(models[kind].save(tmp_path / kind))
        for f in (0.2, 0.6):
            np.testing.assert_array_equal(rem.predict(X, p, f * y),
                                          models[kind].predict(X, p, f * y))
        assert rem.categorical_columns == {2: 3}
        assert rem.loss_curve_ == models[kind].loss_curve_
    hist = load(save(models["history"], tmp_path / "history"), UserHistoryRegressor)
    np.testing.assert_array_equal(hist.predict(models["jobs"]),
                                  models["history"].predict(models["jobs"]))
    assert hist.predict_one("u", 100.0) == 35.0


def test_layout_and_meta(models, tmp_path):
    folder = save(models["remaining"], tmp_path / "b", feature_spec=SPEC)
    assert sorted(f.name for f in folder.iterdir()) == ["meta.json", "remaining.ubj", "runtime"]
    assert list(read_meta(folder)["files"]) == ["remaining.ubj"]
    assert read_meta(folder)["params"]["model"] == "gbm"
    folder = save(models["remaining_gru"], tmp_path / "m", feature_spec=SPEC, extra={"note": 1})
    assert sorted(f.name for f in folder.iterdir()) == ["meta.json", "runtime", "state_dict.pt"]
    assert sorted(f.name for f in (folder / "runtime").iterdir()) == ["meta.json", "model.ubj"]
    meta = read_meta(folder)
    assert meta["format"] == FORMAT and meta["class"].endswith("RemainingTimeRegressor")
    assert meta["params"]["runtime_model"] is None and meta["params"]["epochs"] == 2
    assert meta["feature_names"] == ["x", "steps", "kind"]
    assert meta["training_hash"] == models["remaining"].training_hash_
    assert set(meta["versions"]) >= {"python", "numpy", "scikit-learn", "torch", "xgboost",
                                     "hpc-cosim"}
    assert meta["extra"] == {"note": 1} and list(meta["files"]) == ["state_dict.pt"]
    assert FeatureSpec.from_dict(meta["feature_spec"]) == SPEC
    # the weights file is a plain tensor dict: it loads with weights_only=True
    state = torch.load(folder / "state_dict.pt", weights_only=True)
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    assert not list(tmp_path.glob(".m.*")), "temporary folders left behind"


def test_wrong_class_is_a_clear_error(models, tmp_path):
    folder = save(models["history"], tmp_path / "h")
    with pytest.raises(InputError) as err:
        load(folder, expected_class=RuntimeRegressor)
    assert str(err.value) == (f"{folder / META}: expected a saved RuntimeRegressor, "
                              "got a saved UserHistoryRegressor")
    with pytest.raises(InputError, match="expected a saved RemainingTimeRegressor"):
        RemainingTimeRegressor.load(folder)


def test_missing_things(models, tmp_path):
    with pytest.raises(InputError, match=r"nope: expected a model folder with meta.json, "
                                         r"got no such folder"):
        load(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"empty/meta.json: expected a model folder written "
                                         r"by .*got no such file"):
        load(tmp_path / "empty")
    folder = save(models["runtime"], tmp_path / "rt")
    (folder / "model.ubj").unlink()
    with pytest.raises(InputError, match=r"model.ubj: expected the model.ubj listed in "
                                         r"meta.json, got no such file"):
        load(folder)


def _rewrite_meta(folder: Path, **changes):
    meta = json.loads((folder / META).read_text())
    meta.update(changes)
    (folder / META).write_text(json.dumps(meta))


@pytest.mark.parametrize("kind, payload", [("runtime", "model.ubj"),
                                           ("remaining", "remaining.ubj"),
                                           ("remaining_gru", "state_dict.pt"),
                                           ("history", "history.json")])
def test_corrupt_files(models, tmp_path, kind, payload):
    folder = save(models[kind], tmp_path / kind)
    f = folder / payload
    f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2])
    with pytest.raises(InputError, match=r"expected the SHA-256 recorded in meta.json, got a "
                                         r"checksum mismatch"):
        load(folder)
    # even with a matching checksum, a truncated payload is a one-line InputError
    import hashlib
    _rewrite_meta(folder, files={payload: hashlib.sha256(f.read_bytes()).hexdigest()})
    with pytest.raises(InputError, match=rf"{payload}(:\d+)?: expected .*, got "):
        load(folder)


def test_corrupt_meta(models, tmp_path):
    folder = save(models["history"], tmp_path / "h")
    (folder / META).write_text("{oops")
    with pytest.raises(InputError, match="got invalid JSON"):
        load(folder)
    (folder / META).write_text(json.dumps({"format": "something else"}))
    with pytest.raises(InputError, match="without the predictor format tag"):
        load(folder)
    folder = save(models["history"], tmp_path / "h2")
    _rewrite_meta(folder, format_version=99)
    with pytest.raises(InputError, match=r"format_version: expected 1 \(saved by another"):
        load(folder)
    folder = save(models["history"], tmp_path / "h3")
    _rewrite_meta(folder, **{"class": "os.system"})
    with pytest.raises(InputError, match=r"class: expected one of predictors"):
        load(folder)


def test_pickled_objects_are_refused(models, tmp_path):
    folder = save(models["remaining_gru"], tmp_path / "rem")
    f = folder / "state_dict.pt"
    # a pickle that would build an arbitrary object; weights_only loading must refuse it
    torch.save({"w": torch.zeros(1), "evil": _NotATensor()}, f)
    import hashlib
    _rewrite_meta(folder, files={"state_dict.pt": hashlib.sha256(f.read_bytes()).hexdigest()})
    with pytest.raises(InputError, match="state_dict.pt: expected a state_dict of tensors, got a "
                                         "file torch cannot read safely"):
        load(folder)


class _NotATensor:
    pass


def test_atomic_replace_and_refusals(models, tmp_path):
    target = tmp_path / "model"
    save(models["history"], target)
    save(models["runtime"], target)  # replacing a saved model is allowed
    assert read_meta(target)["class"].endswith("RuntimeRegressor")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    other = tmp_path / "results"
    other.mkdir()
    (other / "keep.txt").write_text("precious")
    with pytest.raises(InputError, match="expected a new folder, an empty one, or a saved model"):
        save(models["runtime"], other)
    assert (other / "keep.txt").read_text() == "precious"
    # a failing save leaves nothing behind and keeps the old model
    with pytest.raises(NotFittedError):
        save(RuntimeRegressor(), target)
    assert read_meta(target)["class"].endswith("RuntimeRegressor")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "results"]
    with pytest.raises(TypeError, match="cannot save dict"):
        save({}, tmp_path / "x")


def test_a_folder_in_the_saved_format_loads(tmp_path):
    # written by hand in the documented layout, as any earlier version wrote it
    import hashlib
    folder = tmp_path / "history"
    folder.mkdir()
    payload = json.dumps({"history": {"u": [10.0, 30.0]}, "total": 40.0, "count": 2})
    (folder / "history.json").write_text(payload)
    (folder / META).write_text(json.dumps({
        "format": FORMAT, "format_version": 1,
        "class": "predictors.history.UserHistoryRegressor",
        "params": {"n_last": 2, "min_history": 2, "cap_at_request": True, "reveal": "submit"},
        "versions": {}, "feature_names_in": None, "feature_spec": None, "feature_names": None,
        "training_hash": "abc", "extra": {},
        "files": {"history.json": hashlib.sha256(payload.encode()).hexdigest()}}))
    model = UserHistoryRegressor.load(folder)
    assert model.predict_one("u", 100.0) == 20.0 and model.predict_one("v", 100.0) == 100.0


class _MyHistory(UserHistoryRegressor):
    """A user's subclass: saved like its base, but not a class a folder may name."""


def test_only_the_known_classes_load(tmp_path):
    folder = save(_MyHistory().fit({"user": ["a"], "submit": [0], "runtime": [5.0]}),
                  tmp_path / "mine")
    assert read_meta(folder)["class"].endswith("._MyHistory")
    for call in (lambda: load(folder), lambda: _MyHistory.load(folder)):
        with pytest.raises(InputError, match=r"meta.json: class: expected one of "
                                             r"predictors.runtime.RuntimeRegressor, "
                                             r"predictors.remaining.RemainingTimeRegressor, "
                                             r"predictors.history.UserHistoryRegressor, "
                                             r"predictors.trace.TraceRuntimeRegressor, got "):
            call()


def test_estimators_share_one_save_and_load():
    from predictors.persist import KNOWN_CLASSES, Persistable

    for cls in (RuntimeRegressor, RemainingTimeRegressor, UserHistoryRegressor):
        assert issubclass(cls, Persistable)
        assert "save" not in vars(cls) and "load" not in vars(cls)
        assert f"{cls.__module__}.{cls.__qualname__}" in KNOWN_CLASSES


def test_a_model_folder_lists_exactly_its_own_files_by_plain_name(models, tmp_path):
    # An emptied list skipped the checksums; a path pointed outside the folder.
    import hashlib
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    digest = hashlib.sha256(outside.read_bytes()).hexdigest()
    for i, files in enumerate(({}, {str(outside): digest}, {"../outside.json": digest})):
        folder = save(models["runtime"], tmp_path / f"r{i}")
        _rewrite_meta(folder, files=files)
        with pytest.raises(InputError, match=r"meta.json: files: expected a SHA-256 for each of "
                                             r"model.ubj \(plain names in the folder\)"):
            load(folder)
    folder = save(models["remaining"], tmp_path / "rem")
    _rewrite_meta(folder, files={})
    with pytest.raises(InputError, match="expected a SHA-256 for each of its payload files"):
        load(folder)


def test_a_feature_spec_that_does_not_fit_its_model_is_refused_on_load(tmp_path):
    # It loaded, then every batch failed: evaluate with a traceback, the server
    # with a 400 that blamed the client.
    from predictors.dataset import generate_dataset
    from predictors.evaluate import evaluate_dir
    from predictors.training import train_model

    data = tmp_path / "data"
    generate_dataset(60, 3, data)
    train_model("runtime", data, tmp_path / "m")
    meta_path = tmp_path / "m" / "runtime" / META
    meta = json.loads(meta_path.read_text())
    meta["feature_spec"]["numeric"] = meta["feature_spec"]["numeric"][:3]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(InputError, match=r"runtime/meta.json: expected the feature_spec the "
                                         r"model was trained with .*, got a feature_spec of "
                                         r"\d+ columns for a model fitted on \d+"):
        evaluate_dir(data, tmp_path / "m")
    meta["feature_spec"] = [1, 2]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(InputError, match=r"meta.json: expected a JSON object of feature names, "
                                         r"got \[1, 2\]"):
        evaluate_dir(data, tmp_path / "m")
