"""Training checkpoints: atomic, loadable with ``weights_only=True``, resumable exactly.

Layout of a training output directory::

    OUT/
      LATEST              name of the newest complete checkpoint (replaced atomically)
      ckpt-000012/
        state.pt          tensors and plain values only (torch.load(weights_only=True))
        meta.json         algorithm, args, network spec, env config, versions
      curve.csv           the learning curve (rewritten from the checkpoint on resume)

A checkpoint is written into a temporary directory beside its final place,
flushed, renamed into place, and only then named in ``LATEST`` (written to a
temporary file and ``os.replace``-d). A process killed at any moment (``kill
-9`` included) leaves either the previous or the new checkpoint complete; a
half-written temporary directory is ignored and removed by the next save.

``state.pt`` holds nothing that needs pickled classes: state dicts, ints,
floats, strings, lists and dicts, and the random-number states as plain
values (numpy's bit-generator state is a dict of Python ints, torch's is a
``uint8`` tensor).

The env config in ``meta.json`` (``env``) is the front's keys (scenario,
overrides, predictor, paired setting) beside the :class:`cosim.env.EnvSpec`'s
:meth:`~cosim.env.spec.EnvSpec.to_dict` (:func:`env_meta`);
:func:`read_env_spec` reads it back, from checkpoints written before the spec
existed too (their ``env`` holds a subset of the same keys).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from cosim.errors import InputError
from cosim.limits import read_json

__all__ = ["save_checkpoint", "load_checkpoint", "latest_checkpoint", "read_meta",
           "capture_rng", "restore_rng", "inference_threads", "env_meta", "read_env_spec",
           "FORMAT"]

FORMAT = "hpc-cosim-agent/1"
_LATEST = "LATEST"
_PREFIX = "ckpt-"


def capture_rng(np_rng: np.random.Generator, torch_gen=None) -> dict[str, Any]:
    """The states of a numpy Generator and a torch Generator as plain values.

    Args:
        np_rng: the training's numpy generator.
        torch_gen: a ``torch.Generator`` (action sampling), or None.
    """
    state: dict[str, Any] = {"numpy": np_rng.bit_generator.state}
    if torch_gen is not None:
        state["torch"] = torch_gen.get_state()
    return state


def restore_rng(state: dict[str, Any], np_rng: np.random.Generator, torch_gen=None) -> None:
    """Put back the states :func:`capture_rng` took (in place)."""
    np_rng.bit_generator.state = state["numpy"]
    if torch_gen is not None and "torch" in state:
        torch_gen.set_state(state["torch"])


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def save_checkpoint(out_dir: str | Path, state: dict[str, Any], meta: dict[str, Any], *,
                    keep: int = 2) -> Path:
    """Write ``state`` and ``meta`` as the newest checkpoint of ``out_dir``, atomically.

    Args:
        out_dir: the training output directory (created if missing).
        state: tensors and plain values (saved with ``torch.save``); must contain ``update``.
        meta: JSON-serializable description (algorithm, args, network spec, env).
        keep: how many complete checkpoints to keep (older ones are deleted).

    Returns:
        The checkpoint directory written.
    """
    import torch

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(".tmp-ckpt-*"):
        shutil.rmtree(stale, ignore_errors=True)
    name = f"{_PREFIX}{int(state['update']):06d}"
    suffix = 0
    while (out / name).exists():
        suffix += 1
        name = f"{_PREFIX}{int(state['update']):06d}-{suffix}"
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-ckpt-", dir=out))
    with open(tmp / "state.pt", "wb") as fh:
        torch.save({**state, "format": FORMAT}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    with open(tmp / "meta.json", "w", encoding="utf-8") as fh:
        json.dump({**meta, "format": FORMAT}, fh, indent=2, sort_keys=True, default=_jsonable)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    _fsync_dir(tmp)
    final = out / name
    os.rename(tmp, final)
    _fsync_dir(out)
    fd, pointer_tmp = tempfile.mkstemp(prefix=".tmp-latest-", dir=out)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(name + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(pointer_tmp, out / _LATEST)
    _fsync_dir(out)
    complete = sorted((p for p in out.glob(f"{_PREFIX}*") if p.is_dir()),
                      key=lambda p: p.stat().st_mtime_ns)
    for old in complete[:-max(1, keep)]:
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | set):
        return list(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def latest_checkpoint(path: str | Path) -> Path | None:
    """The checkpoint directory ``path`` stands for, or None when there is none.

    ``path`` is either a training output directory (its ``LATEST`` is followed)
    or a checkpoint directory itself (one holding ``state.pt``).
    """
    p = Path(path)
    if (p / "state.pt").is_file() and (p / "meta.json").is_file():
        return p
    pointer = p / _LATEST
    if pointer.is_file():
        name = pointer.read_text(encoding="utf-8", errors="replace").strip()
        target = p / name
        # LATEST names a checkpoint folder inside this one, never a path out of it.
        if not name.startswith(_PREFIX) or Path(name).name != name:
            raise InputError(str(pointer), repr(name[:80]),
                             f"the name of a {_PREFIX}* folder inside {p}")
        if (target / "state.pt").is_file() and (target / "meta.json").is_file():
            return target
    # No pointer (or a dangling one): fall back to the newest complete checkpoint.
    candidates = [c for c in p.glob(f"{_PREFIX}*")
                  if (c / "state.pt").is_file() and (c / "meta.json").is_file()]
    if not candidates:
        return None
    return max(candidates, key=lambda c: c.stat().st_mtime_ns)


def read_meta(path: str | Path) -> dict[str, Any]:
    """The ``meta.json`` of the checkpoint ``path`` stands for.

    Raises:
        InputError: no checkpoint there, or not one written by this module.
    """
    ckpt = latest_checkpoint(path)
    if ckpt is None:
        raise InputError(str(path), "no checkpoint", "a training output or checkpoint directory "
                         "(holding LATEST or state.pt + meta.json)")
    meta = read_json(ckpt / "meta.json", "a meta.json written by agents.checkpoint")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise InputError(str(ckpt / "meta.json"), f"format {found!r}",
                         f"format {FORMAT!r}")
    meta["_path"] = str(ckpt)
    return meta


def load_checkpoint(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Load ``(state, meta)`` of the checkpoint ``path`` stands for.

    The state is read with ``torch.load(..., weights_only=True)``: no code from
    the file is ever run.

    Raises:
        InputError: no checkpoint there, or not one written by this module.
    """
    import torch

    meta = read_meta(path)
    ckpt = Path(meta["_path"])
    try:
        state = torch.load(ckpt / "state.pt", map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        # weights_only refused the payload: it names code, not only weights.
        raise InputError(str(ckpt / "state.pt"), "a pickle that names code, not only weights",
                         f"a {FORMAT} checkpoint (nothing in it was run)") from None
    except (RuntimeError, EOFError, OSError, ValueError, IndexError, KeyError,
            zipfile.BadZipFile) as exc:
        # Truncated or torn by a crash mid-copy, or not a torch file at all.
        detail = str(exc).splitlines()[0][:80] if str(exc) else type(exc).__name__
        raise InputError(str(ckpt / "state.pt"), f"a damaged file ({detail})",
                         f"a {FORMAT} checkpoint written by agents.checkpoint") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise InputError(str(ckpt / "state.pt"), "an unknown file", f"a {FORMAT} training state")
    bad = _first_not_finite(state)
    if bad is not None:
        raise InputError(str(ckpt / "state.pt"), f"weights that are NaN or infinite ({bad})",
                         "finite weights (a diverged run: resume from an earlier checkpoint)")
    return state, meta


def _first_not_finite(state: Any, where: str = "") -> str | None:
    """The key path of the first floating tensor in ``state`` holding NaN or inf, else None."""
    import torch

    stack = [(where, state)]
    while stack:
        key, value = stack.pop()
        if isinstance(value, torch.Tensor):
            if value.is_floating_point() and not bool(torch.isfinite(value).all()):
                return key or "a tensor"
        elif isinstance(value, dict):
            stack.extend((f"{key}.{k}" if key else str(k), v) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((f"{key}[{i}]", v) for i, v in enumerate(value))
    return None


def env_meta(env_config: dict[str, Any] | None) -> dict[str, Any] | None:
    """An env config as a checkpoint saves it: the front's keys, then every spec setting.

    The settings are validated (:class:`cosim.env.EnvSpec`) and written in
    full, JSON-safe, so the checkpoint describes its env without relying on
    today's defaults. None stays None (a learner trained without a config).

    Raises:
        ScenarioError: an unknown key or a bad setting.
    """
    if env_config is None:
        return None
    from cosim.env.spec import split_config

    spec, front = split_config(env_config)
    return {**front, **spec.to_dict()}


def read_env_spec(meta: dict[str, Any]):
    """``(spec, front)`` of a checkpoint's ``meta``: its :class:`cosim.env.EnvSpec` and front keys.

    Raises:
        InputError: the checkpoint has no env config, or one with a bad setting
            (located as ``.../meta.json: env.KEY``).
    """
    from cosim.env.spec import split_config

    where = f"{meta.get('_path', 'checkpoint')}/meta.json: env"
    if not isinstance(meta.get("env"), dict):
        raise InputError(where, "no environment description",
                         "a checkpoint written by `python -m agents train`")
    return split_config(meta["env"], where=where)


def inference_threads() -> None:
    """Let torch use one thread where a trained policy acts outside training.

    The networks are small and act on one decision at a time, so torch's
    intra-op threads cost more in hand-offs than they gain (issue 20: a
    600-job replay took 1.9 s on one thread, 33 s on two). Called when a
    policy is loaded to act; an ``OMP_NUM_THREADS`` set by the user wins.
    """
    import os

    import torch

    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)
