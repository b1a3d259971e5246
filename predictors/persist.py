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
  for :class:`~predictors.history.UserHistoryRegressor`; ``model.ubj`` for
  :class:`~predictors.trace.TraceRuntimeRegressor` too.

The folder is written under a temporary name next to the target and renamed
into place, so an interrupted save never leaves a half-written model that
looks complete. Loading checks the class and the payload checksums first,
so a wrong, missing or corrupt file is a one-line
:class:`~cosim.errors.InputError`, not a traceback from deep inside a library.

This module knows the folder layout, not the models: each predictor class
derives from :class:`Persistable` and writes and reads its own payload
(``_write_payload`` / ``_read_payload``). Loading instantiates only the
classes of :data:`KNOWN_CLASSES`, a fixed table of class name to module: the
class name in a ``meta.json`` is never imported as given, and this module
imports the estimator modules by name only when a folder needs them (they
import this one for the mixin).

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
import importlib
import json
import os
import platform
import shutil
import uuid
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar, Self

from cosim.errors import InputError
from cosim.limits import read_json
from predictors._version import __version__

__all__ = ["FORMAT", "FORMAT_VERSION", "META", "KNOWN_CLASSES", "Persistable", "save", "load",
           "read_meta", "first_line"]

#: Tag in ``meta.json`` that marks a folder as a saved predictor.
FORMAT = "hpc-cosim-predictor"
#: Layout version; bumped when the folder layout changes incompatibly.
FORMAT_VERSION = 1
#: Name of the metadata file.
META = "meta.json"

#: The classes a folder may hold: class name in ``meta.json`` -> module that defines it.
KNOWN_CLASSES: Mapping[str, str] = {
    "predictors.runtime.RuntimeRegressor": "predictors.runtime",
    "predictors.remaining.RemainingTimeRegressor": "predictors.remaining",
    "predictors.history.UserHistoryRegressor": "predictors.history",
    "predictors.trace.TraceRuntimeRegressor": "predictors.trace",
}

# Every Persistable subclass by class name (filled by __init_subclass__); load
# looks names up here only after checking them against KNOWN_CLASSES.
_REGISTRY: dict[str, type[Persistable]] = {}


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


class Persistable:
    """Mixin of the predictors that save to and load from a model folder.

    A subclass names its payload files and the libraries whose versions
    matter, and implements two hooks; :func:`save` and :func:`load` do the
    rest (``meta.json``, checksums, the atomic rename, error messages).

    Class attributes:
        _payload_files: the files ``_write_payload`` writes (checksummed in
            ``meta.json``).
        _libraries: packages whose versions ``meta.json`` records besides
            Python, numpy, scikit-learn and hpc-cosim.
    """

    _payload_files: ClassVar[tuple[str, ...]] = ()
    _libraries: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _REGISTRY[_class_name(cls)] = cls

    def save(self, path: str | Path, **meta: Any) -> Path:
        """Save to the folder ``path``; see :func:`predictors.persist.save` for ``meta``."""
        return save(self, path, **meta)

    @classmethod
    def load(cls, path: str | Path) -> Self:
        """Load a folder written by :meth:`save`; another saved class is an ``InputError``."""
        return load(path, expected_class=cls)

    # ------------------------------------------------------------------- hooks

    def _write_payload(self, folder: Path, feature_spec: Any) -> dict[str, Any]:
        """Write the payload files into ``folder``.

        Returns:
            The class's own ``meta.json`` entries (written after ``params``).

        Raises:
            sklearn.exceptions.NotFittedError: the model is not fitted.
        """
        raise NotImplementedError

    @classmethod
    def _read_payload(cls, folder: Path, meta: Mapping[str, Any], params: dict[str, Any]
                      ) -> Self:
        """Rebuild the fitted model from ``folder`` (checksums already verified).

        Args:
            folder: the model folder.
            meta: its ``meta.json``.
            params: the saved constructor parameters (a copy the hook may change).

        Raises:
            InputError: a payload file the library cannot read.
            TypeError, ValueError, KeyError: parameters or entries this version
                cannot use (:func:`load` reports them as one line).
        """
        raise NotImplementedError

    # ------------------------------------------------------------------ folder

    def _write_folder(self, folder: Path, feature_spec: Any = None,
                      extra: Mapping[str, Any] | None = None) -> None:
        """Write the payload and ``meta.json`` into the existing, empty ``folder``."""
        meta: dict[str, Any] = {"format": FORMAT, "format_version": FORMAT_VERSION,
                                "class": _class_name(type(self)),
                                "params": _json_params(self.get_params(deep=False))}
        meta.update(self._write_payload(folder, feature_spec))
        meta["versions"] = _versions(*self._libraries)
        names_in = getattr(self, "feature_names_in_", None)
        names_in = None if names_in is None else [str(n) for n in names_in]
        meta["feature_names_in"] = names_in  # restored as the estimator's own attribute
        meta["feature_spec"] = None if feature_spec is None else feature_spec.to_dict()
        meta["feature_names"] = list(feature_spec.names) if feature_spec is not None else names_in
        meta["training_hash"] = getattr(self, "training_hash_", "")
        meta["files"] = {name: _sha256(folder / name) for name in self._payload_files}
        meta["extra"] = dict(extra or {})
        (folder / META).write_text(json.dumps(meta, indent=2, default=_json_default)
                                   + "\n")


def _versions(*packages: str) -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("hpc-cosim", "numpy", "scikit-learn", *packages):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "unknown"
    if out["hpc-cosim"] == "unknown":  # running from a source tree: predictors is part of it
        out["hpc-cosim"] = __version__
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


def _json_default(v: Any) -> Any:
    # numpy scalars in params or extra facts
    if hasattr(v, "item"):
        return v.item()
    if hasattr(v, "tolist"):
        return v.tolist()
    raise TypeError(f"{type(v).__name__} is not JSON serializable")


# ---------------------------------------------------------------------- save


def save(model: Any, path: str | Path, *, feature_spec: Any = None,
         extra: Mapping[str, Any] | None = None) -> Path:
    """Write a fitted predictor to the folder ``path`` (atomically).

    Args:
        model: a fitted ``RuntimeRegressor``, ``RemainingTimeRegressor`` or
            ``UserHistoryRegressor`` (any :class:`Persistable`).
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
    if not isinstance(model, Persistable):
        known = [_short(name) for name in KNOWN_CLASSES]
        raise TypeError(f"cannot save {type(model).__name__}: expected "
                        f"{', '.join(known[:-1])} or {known[-1]}")
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
        model._write_folder(tmp, feature_spec, extra)
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
    if not meta_path.exists():
        raise InputError(str(meta_path), "no such file",
                         "a model folder written by 'python -m predictors train'")
    meta = read_json(meta_path, "the meta.json a save wrote")
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
        InputError: missing folder or file, wrong or unknown class, checksum
            mismatch, or a payload the library cannot read.
    """
    path = Path(path)
    meta = read_meta(path)
    cls_name = meta["class"]
    if expected_class is not None:
        want = expected_class if isinstance(expected_class, str) else _class_name(expected_class)
        if cls_name != want:
            raise InputError(str(path / META), f"a saved {_short(cls_name)}",
                             f"a saved {_short(want)}")
    if cls_name not in KNOWN_CLASSES:
        raise InputError(f"{path / META}: class", repr(cls_name),
                         f"one of {', '.join(KNOWN_CLASSES)}")
    cls = _known_class(cls_name)
    # Exactly the class's payload files, by plain name: an emptied list skipped the
    # checksums, and a path ("/etc/x", "../x") pointed outside the folder.
    listed = meta["files"]
    # (a class whose files depend on its parameters has a property here: plain names then)
    known = cls._payload_files if isinstance(cls._payload_files, tuple) else None
    if (not listed or (known is not None and sorted(listed) != sorted(known))
            or any(Path(n).name != n or n in ("", ".", "..") for n in listed)
            or not all(isinstance(d, str) for d in listed.values())):
        raise InputError(f"{path / META}: files", repr(listed)[:120],
                         f"a SHA-256 for each of {', '.join(known) if known else 'its payload files'}"
                         " (plain names in the folder)")
    for name, digest in listed.items():
        f = path / name
        if not f.is_file():
            raise InputError(str(f), "no such file", f"the {name} listed in {META}")
        if _sha256(f) != digest:
            raise InputError(str(f), "a checksum mismatch (the file is corrupt or was modified)",
                             f"the SHA-256 recorded in {META}")
    try:
        return cls._read_payload(path, meta, dict(meta["params"]))
    except InputError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise InputError(str(path / META), f"parameters this version cannot use "
                         f"({first_line(exc)})", "a model saved by this version") from None


def _known_class(name: str) -> type[Persistable]:
    """The class of a :data:`KNOWN_CLASSES` name, importing its module on first use."""
    if name not in _REGISTRY:
        importlib.import_module(KNOWN_CLASSES[name])
    return _REGISTRY[name]


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (at most 160 characters), for one-line errors."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:160]
