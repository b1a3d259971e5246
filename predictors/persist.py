"""Save and load predictors in safe formats: no pickle anywhere.

A saved model is a folder:

* ``meta.json``: format tag and version, the model class, its constructor
  parameters, the feature spec or names, library versions, the SHA-256 of
  the training data and of every payload file;
* the payload: ``model.ubj`` (XGBoost's own binary JSON, via
  ``Booster.save_model``) for :class:`~predictors.runtime.RuntimeRegressor`;
  ``state_dict.pt`` (tensors only, read back with
  ``torch.load(..., weights_only=True)``) plus a nested ``runtime/`` model for
  :class:`~predictors.remaining.RemainingTimeRegressor`; ``history.json``
  for :class:`~predictors.history.UserHistoryRegressor`.

The folder is written under a temporary name next to the target and renamed
into place, so an interrupted save never leaves a half-written model that
looks complete. Loading checks the class and the payload checksums first,
so a wrong, missing or corrupt file is a one-line
:class:`~cosim.errors.InputError`, not a traceback from deep inside a library.

Examples:
    >>> import tempfile
    >>> from predictors.history import UserHistoryRegressor
    >>> h = UserHistoryRegressor().fit({"user": ["a", "a"], "submit": [0, 1], "runtime": [10, 30]})
    >>> folder = save(h, Path(tempfile.mkdtemp()) / "history")
    >>> load(folder, expected_class=UserHistoryRegressor).predict_one("a", 100.0)
    20.0
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import uuid
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from cosim.errors import InputError

__all__ = ["FORMAT", "FORMAT_VERSION", "META", "save", "load", "read_meta"]

#: Tag in ``meta.json`` that marks a folder as a saved predictor.
FORMAT = "hpc-cosim-predictor"
#: Layout version; bumped when the folder layout changes incompatibly.
FORMAT_VERSION = 1
#: Name of the metadata file.
META = "meta.json"

_RUNTIME = "predictors.runtime.RuntimeRegressor"
_REMAINING = "predictors.remaining.RemainingTimeRegressor"
_HISTORY = "predictors.history.UserHistoryRegressor"


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _versions(*packages: str) -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("hpc-cosim", "numpy", "scikit-learn", *packages):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "unknown"
    if out["hpc-cosim"] == "unknown":  # running from a source tree
        import cosim

        out["hpc-cosim"] = cosim.__version__
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _json_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Constructor parameters as JSON (dict keys become strings, nested models dropped)."""
    out: dict[str, Any] = {}
    for k, v in params.items():
        if hasattr(v, "get_params"):
            out[k] = None  # saved as its own folder
        elif isinstance(v, Mapping):
            out[k] = {str(a): b for a, b in v.items()}
        else:
            out[k] = v
    return out


# ---------------------------------------------------------------------- save


def save(model: Any, path: str | Path, *, feature_spec: Any = None,
         extra: Mapping[str, Any] | None = None) -> Path:
    """Write a fitted predictor to the folder ``path`` (atomically).

    Args:
        model: a fitted ``RuntimeRegressor``, ``RemainingTimeRegressor`` or
            ``UserHistoryRegressor``.
        path: the model folder; an existing model folder (or an empty folder)
            is replaced, anything else is refused.
        feature_spec: the :class:`~predictors.runtime.FeatureSpec` the model's
            ``X`` was built with, stored so a loader can build the same matrix.
        extra: more JSON-ready facts to keep in ``meta.json`` (dataset path,
            training time, ...).

    Returns:
        The folder.

    Raises:
        InputError: ``path`` is a file or a non-empty folder that is not a model.
        TypeError: ``model`` is not a supported predictor.
        sklearn.exceptions.NotFittedError: ``model`` is not fitted.
    """
    path = Path(path)
    if path.exists() and not (path.is_dir() and (
            (path / META).is_file() or not any(path.iterdir()))):
        raise InputError(str(path), "an existing file or non-empty folder without meta.json",
                         "a new folder, an empty one, or a saved model to replace")
    path.parent.mkdir(parents=True, exist_ok=True)
    # a plain mkdir (not mkdtemp) so the folder gets the user's umask, not 0700
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()
    try:
        _write(model, tmp, feature_spec, extra)
        if path.exists():
            old = path.parent / f".{path.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(path, old)
            os.rename(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _write(model: Any, folder: Path, feature_spec: Any, extra: Mapping[str, Any] | None
           ) -> None:
    from sklearn.utils.validation import check_is_fitted

    from predictors.history import UserHistoryRegressor
    from predictors.remaining import RemainingTimeRegressor
    from predictors.runtime import RuntimeRegressor

    if not isinstance(model, RuntimeRegressor | RemainingTimeRegressor | UserHistoryRegressor):
        raise TypeError(f"cannot save {type(model).__name__}: expected RuntimeRegressor, "
                        "RemainingTimeRegressor or UserHistoryRegressor")
    meta: dict[str, Any] = {"format": FORMAT, "format_version": FORMAT_VERSION,
                            "class": _class_name(type(model)),
                            "params": _json_params(model.get_params(deep=False))}
    files: list[str] = []
    if isinstance(model, RuntimeRegressor):
        check_is_fitted(model, "model_")
        model.get_booster().save_model(str(folder / "model.ubj"))
        files.append("model.ubj")
        meta["n_features"] = int(model.n_features_in_)
        meta["versions"] = _versions("xgboost")
    elif isinstance(model, RemainingTimeRegressor):
        import torch

        check_is_fitted(model, "net_")
        # tensors only: torch.save of a plain dict of tensors is loadable with weights_only=True
        state = {k: v.detach().cpu().contiguous() for k, v in model.net_.state_dict().items()}
        torch.save(state, folder / "state_dict.pt")
        files.append("state_dict.pt")
        _write(model.runtime_model_, _mkdir(folder / "runtime"), feature_spec, None)
        meta["arch"] = model._arch()
        meta["n_features"] = int(model.n_features_in_)
        meta["versions"] = _versions("torch", "xgboost")
    else:
        check_is_fitted(model, "history_")
        (folder / "history.json").write_text(json.dumps(model.state_dict()))
        files.append("history.json")
        meta["versions"] = _versions()
    names_in = getattr(model, "feature_names_in_", None)
    names_in = None if names_in is None else [str(n) for n in names_in]
    meta["feature_names_in"] = names_in  # restored as the estimator's own attribute
    meta["feature_spec"] = None if feature_spec is None else feature_spec.to_dict()
    meta["feature_names"] = list(feature_spec.names) if feature_spec is not None else names_in
    meta["training_hash"] = getattr(model, "training_hash_", "")
    meta["files"] = {name: _sha256(folder / name) for name in files}
    meta["extra"] = dict(extra or {})
    (folder / META).write_text(json.dumps(meta, indent=2, default=_json_default)
                               + "\n")


def _json_default(v: Any) -> Any:
    # numpy scalars in params or extra facts
    if hasattr(v, "item"):
        return v.item()
    if hasattr(v, "tolist"):
        return v.tolist()
    raise TypeError(f"{type(v).__name__} is not JSON serializable")


def _mkdir(p: Path) -> Path:
    p.mkdir()
    return p


# ---------------------------------------------------------------------- load


def read_meta(path: str | Path) -> dict[str, Any]:
    """The checked ``meta.json`` of a model folder.

    Raises:
        InputError: the folder or file is missing, or not a saved predictor.
    """
    path = Path(path)
    meta_path = path / META
    if not path.is_dir():
        raise InputError(str(path), "no such folder", "a model folder with meta.json")
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise InputError(str(meta_path), "no such file",
                         "a model folder written by 'python -m predictors train'") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(str(meta_path), f"unreadable JSON ({_first_line(exc)})",
                         "the meta.json a save wrote") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputError(str(meta_path), "a file without the predictor format tag",
                         f'"format": "{FORMAT}"')
    if meta.get("format_version") != FORMAT_VERSION:
        raise InputError(f"{meta_path}: format_version", repr(meta.get("format_version")),
                         f"{FORMAT_VERSION} (saved by another version of hpc-cosim)")
    for key, kind in (("class", str), ("params", dict), ("files", dict)):
        if not isinstance(meta.get(key), kind):
            raise InputError(f"{meta_path}: {key}", repr(meta.get(key))[:60],
                             f"a {kind.__name__}")
    return meta


def load(path: str | Path, expected_class: type | str | None = None) -> Any:
    """Load a predictor saved by :func:`save`.

    Args:
        path: the model folder.
        expected_class: the class (or its dotted name) the caller needs;
            another saved class is an error instead of a surprise later.

    Raises:
        InputError: missing folder or file, wrong class, checksum mismatch, or
            a payload the library cannot read.
    """
    path = Path(path)
    meta = read_meta(path)
    cls_name = meta["class"]
    if expected_class is not None:
        want = expected_class if isinstance(expected_class, str) else _class_name(expected_class)
        if cls_name != want:
            raise InputError(str(path / META), f"a saved {cls_name.rsplit('.', 1)[-1]}",
                             f"a saved {want.rsplit('.', 1)[-1]}")
    for name, digest in meta["files"].items():
        f = path / name
        if not f.is_file():
            raise InputError(str(f), "no such file", f"the {name} listed in {META}")
        if _sha256(f) != digest:
            raise InputError(str(f), "a checksum mismatch (the file is corrupt or was modified)",
                             f"the SHA-256 recorded in {META}")
    params = dict(meta["params"])
    try:
        if cls_name == _RUNTIME:
            return _load_runtime(path, meta, params)
        if cls_name == _REMAINING:
            return _load_remaining(path, meta, params)
        if cls_name == _HISTORY:
            return _load_history(path, params)
    except InputError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise InputError(str(path / META), f"parameters this version cannot use "
                         f"({_first_line(exc)})", "a model saved by this version") from None
    raise InputError(f"{path / META}: class", repr(cls_name),
                     f"one of {_RUNTIME}, {_REMAINING}, {_HISTORY}")


def _load_runtime(path: Path, meta: Mapping[str, Any], params: dict[str, Any]) -> Any:
    from xgboost.core import XGBoostError

    from predictors.runtime import RuntimeRegressor

    f = path / "model.ubj"
    try:
        return RuntimeRegressor.from_booster(
            f, params, int(meta["n_features"]), meta.get("feature_names_in"),
            str(meta.get("training_hash", "")))
    except XGBoostError as exc:
        raise InputError(str(f), f"a file XGBoost cannot read ({_first_line(exc)})",
                         "an XGBoost UBJ model") from None


def _load_remaining(path: Path, meta: Mapping[str, Any], params: dict[str, Any]) -> Any:
    import pickle

    import torch

    from predictors.remaining import RemainingTimeRegressor

    f = path / "state_dict.pt"
    try:
        state = torch.load(f, map_location="cpu", weights_only=True)
    except (RuntimeError, pickle.UnpicklingError, EOFError, OSError, ValueError) as exc:
        raise InputError(str(f), f"a file torch cannot read safely ({_first_line(exc)})",
                         "a state_dict of tensors") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor)
                                              for v in state.values()):
        raise InputError(str(f), type(state).__name__, "a state_dict of tensors")
    runtime_model = load(path / "runtime", expected_class=_RUNTIME)
    params["runtime_model"] = None
    if params.get("categorical_columns") is not None:
        params["categorical_columns"] = {int(k): int(v)
                                         for k, v in params["categorical_columns"].items()}
    model = RemainingTimeRegressor(**params)
    try:
        model._restore(meta["arch"], state, runtime_model, str(meta.get("training_hash", "")))
    except RuntimeError as exc:  # load_state_dict: missing keys or wrong shapes
        raise InputError(str(f), f"tensors that do not fit the saved architecture "
                         f"({_first_line(exc)})", "the state_dict saved with this meta.json"
                         ) from None
    return model


def _load_history(path: Path, params: dict[str, Any]) -> Any:
    from predictors.history import UserHistoryRegressor

    f = path / "history.json"
    try:
        state = json.loads(f.read_text())
        model = UserHistoryRegressor(**params)
        model.load_state_dict(state)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(str(f), f"unreadable history ({_first_line(exc)})",
                         "the history.json a save wrote") from None
    return model


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:160]
