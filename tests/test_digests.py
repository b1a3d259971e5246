"""Behaviour-preserving refactors: schedules and observations match recorded digests.

The digests in ``tests/digests.json`` were recorded from the code before the
seams redesign (issue 9). A change that moves any job's start, end, mode or
reason, or any bit of an observation, changes a digest, so a refactor that
claims to preserve behaviour can prove it. A deliberate behaviour change
re-records the affected entries (``python tests/test_digests.py --record
KEY...``) and says why in its commit.

What is hashed is the content of ``jobs.parquet`` (every column, in order,
values as JSON), not the file bytes, so the check does not depend on the
pyarrow version that wrote the file.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]
DIGESTS = Path(__file__).with_name("digests.json")

HEURISTICS = ("fcfs", "lcfs", "sjf", "saf", "largest", "f1", "wfp3", "unicef", "random", "tetris")
BACKFILLS = ("none", "greedy", "easy", "conservative")
LUBLIN_POLICIES = [f"{h}+{b}" for h in HEURISTICS for b in BACKFILLS] + ["knapsack"]
VASP_POLICIES = ("fcfs+easy", "sjf+easy@history", "sjf+easy@xgboost", "saf+easy@xgboost",
                 "fcfs+easy@rnn", "sjf+easy@rnn", "sjf+easy@rnn+kill")
DEEPRM_POLICIES = ("sjf+greedy", "tetris", "random")

#: (key, scenario file, --set overrides, policies): small enough for the default run.
CASES = [
    ("lublin256-2000", "scenarios/lublin256.yaml", ["workload.jobs=2000"], LUBLIN_POLICIES),
    ("deeprm-600", "scenarios/deeprm.yaml", ["workload.jobs=600"], DEEPRM_POLICIES),
    ("vasp-300", "scenarios/vasp.yaml", ["workload.jobs=300", "predictor.update_interval=200"],
     VASP_POLICIES),
    # Estimates that jobs beat: conservative plans are compressed (in priority order).
    ("lublin256-tsafrir-600", "scenarios/lublin256.yaml",
     ["workload.jobs=600", "workload.estimates.model=tsafrir"],
     [f"{h}+{b}" for h in HEURISTICS for b in ("easy", "conservative")]),
]
#: The shipped scenarios at full size (marked slow).
FULL_CASES = [
    ("lublin256-full", "scenarios/lublin256.yaml", [], LUBLIN_POLICIES),
    ("deeprm-full", "scenarios/deeprm.yaml", [], DEEPRM_POLICIES),
]
#: Env configurations whose observation/mask stream is hashed over random legal actions.
ENV_CASES = {
    "env-compact-8-2-k2": dict(observation="compact", window=(8, 2), kill_slots=2),
    "env-compact-10-0": dict(observation="compact", window=(10, 0), kill_slots=0),
    "env-kernel-6-2-k1": dict(observation="kernel", window=(6, 2), kill_slots=1),
    "env-image-10-0": dict(observation="image", window=(10, 0), kill_slots=0),
}
ENV_STEPS = 3000


def table_digest(path: Path) -> str:
    """SHA-256 of a Parquet table's columns (names and values, in order)."""
    table = pq.read_table(path)
    h = hashlib.sha256()
    for name in table.column_names:
        h.update(name.encode())
        h.update(json.dumps(table.column(name).to_pylist(), allow_nan=True).encode())
    return h.hexdigest()


def _models(cache: Path) -> Path:
    from predictors.bundle import ensure_models

    return ensure_models(cache, jobs=600, seed=3, remaining=True, epochs=2,
                         generator_params={"population_seed": 42, "mean_interarrival": 360},
                         echo=None)


def run_case(scenario: str, sets: list[str], policies, out: Path, models: Path | None) -> dict:
    """``{policy: digest of its jobs.parquet}`` for one scenario."""
    from cosim.compose import run_scenario
    from cosim.config import load_scenario

    sets = list(sets)
    if models is not None:
        sets.append(f"predictor.models={models}")
    sc = load_scenario(ROOT / scenario, sets)
    run_scenario(sc, list(policies), out, base_dir=ROOT / "scenarios", plots=False,
                 progress=False, echo=None)
    comparison = json.loads((out / "comparison.json").read_text())
    return {p["policy"]: table_digest(out / p["dir"] / "jobs.parquet")
            for p in comparison["policies"]}


def env_digest(kwargs: dict, steps: int = ENV_STEPS) -> dict[str, str]:
    """Digests of observations+masks and of rewards over ``steps`` random legal actions."""
    from cosim.env import SchedulingEnv

    env = SchedulingEnv(ROOT / "scenarios/lublin256.yaml", episode_jobs=128, **kwargs)
    rng = np.random.default_rng(7)
    h_obs, h_rew = hashlib.sha256(), hashlib.sha256()
    obs, info = env.reset(seed=3)
    episode = 0
    for _ in range(steps):
        h_obs.update(np.ascontiguousarray(obs).tobytes())
        h_obs.update(info["action_mask"].tobytes())
        legal = np.flatnonzero(info["action_mask"])
        obs, reward, terminated, truncated, info = env.step(int(rng.choice(legal)))
        h_rew.update(np.float64(reward).tobytes())
        if terminated or truncated:
            episode += 1
            obs, info = env.reset(seed=3 + episode)
    return {"obs": h_obs.hexdigest(), "reward": h_rew.hexdigest()}


def _recorded() -> dict:
    return json.loads(DIGESTS.read_text())


@pytest.fixture(scope="module")
def vasp_models(tmp_path_factory):
    return _models(tmp_path_factory.mktemp("digest-models"))


@pytest.mark.parametrize("key,scenario,sets,policies", CASES, ids=[c[0] for c in CASES])
def test_schedules_match_recorded_digests(key, scenario, sets, policies, tmp_path, vasp_models):
    models = vasp_models if "vasp" in scenario else None
    got = run_case(scenario, sets, policies, tmp_path / key, models)
    want = _recorded()[key]
    differ = [p for p in policies if got[p] != want[p]]
    assert not differ, f"{key}: jobs.parquet changed for {', '.join(differ)}"


@pytest.mark.slow
@pytest.mark.parametrize("key,scenario,sets,policies", FULL_CASES, ids=[c[0] for c in FULL_CASES])
def test_full_scenarios_match_recorded_digests(key, scenario, sets, policies, tmp_path):
    got = run_case(scenario, sets, policies, tmp_path / key, None)
    want = _recorded()[key]
    differ = [p for p in policies if got[p] != want[p]]
    assert not differ, f"{key}: jobs.parquet changed for {', '.join(differ)}"


@pytest.mark.parametrize("key", list(ENV_CASES))
def test_env_observations_match_recorded_digests(key):
    got = env_digest(ENV_CASES[key])
    want = _recorded()[key]
    assert got["obs"] == want["obs"], f"{key}: observations or masks changed"
    assert got["reward"] == want["reward"], f"{key}: rewards changed"


def _record(keys: list[str]) -> None:
    import tempfile

    data = _recorded() if DIGESTS.exists() else {}
    tmp = Path(tempfile.mkdtemp())
    models = None
    for key, scenario, sets, policies in CASES + FULL_CASES:
        if keys and key not in keys:
            continue
        if "vasp" in scenario and models is None:
            models = _models(tmp / "models")
        data[key] = run_case(scenario, sets, policies, tmp / key,
                             models if "vasp" in scenario else None)
        print(key, "recorded", file=sys.stderr)
    for key, kwargs in ENV_CASES.items():
        if keys and key not in keys:
            continue
        data[key] = env_digest(kwargs)
        print(key, "recorded", file=sys.stderr)
    DIGESTS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    # record with this checkout's code, not an installed copy elsewhere
    sys.path.insert(0, str(ROOT))
    if sys.argv[1:2] != ["--record"]:
        sys.exit("usage: python tests/test_digests.py --record [KEY ...]")
    _record(sys.argv[2:])
