"""Behaviour-preserving refactors of the learners: same-seed learning curves match digests.

Each learner (PPO, A2C, PG, DQL) trains for a few hundred decisions through
``python -m agents train`` (behaviour-cloning warm start from a teacher, the
mimic term where the learner has one) on a small Lublin episode. The curve
rows (every column except wall-clock ones) and the final network weights are
hashed and compared with ``tests/learning_digests.json``, recorded from the
code before the learners were split (issue 19). A change that moves any
number of a learning curve changes a digest; a deliberate change re-records
(``python tests/test_learning_digests.py --record``) and says why in its
commit.

Floating-point results depend on the torch build, so the digests are
compared only under the torch and numpy versions they were recorded with
(otherwise the test is skipped, saying so). They depend on the CPU too:
MKL and ATen pick their kernels by the instruction set, and the same build
gives other floats on an AVX512 machine than on the machines the digests
were first recorded on. Digests recorded on a CPU are kept under
``by_cpu`` (by ``torch.backends.cpu.get_cpu_capability()`` and the vendor:
an AMD EPYC with AVX512 gives other floats than the Intel machine the
``AVX512`` digests came from); the plain ``cases`` serve a CPU without its
own recording. ``--record-this-cpu`` adds this CPU's recording, the code
unchanged (run it at a commit whose digests pass elsewhere).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.loop import RENAMED_METRICS

ROOT = Path(__file__).resolve().parents[1]
DIGESTS = Path(__file__).with_name("learning_digests.json")
SCENARIO = "scenarios/lublin256.yaml"

#: algo -> extra command-line arguments (all runs: select actions, 32-job episodes).
CASES = {
    "ppo": ["--teacher", "sjf", "--bc-steps", "96", "--bc-epochs", "2",
            "--arg", "num_steps=64", "--arg", "num_minibatches=2", "--arg", "update_epochs=2"],
    "a2c": ["--teacher", "sjf", "--bc-steps", "96", "--bc-epochs", "2",
            "--arg", "num_steps=16", "--arg", "num_envs=2"],
    "pg": ["--teacher", "sjf", "--bc-steps", "96", "--bc-epochs", "2", "--arg", "num_steps=32"],
    "dql": ["--teacher", "sjf", "--bc-steps", "96", "--bc-epochs", "2", "--arg", "num_steps=16",
            "--arg", "learning_starts=32", "--arg", "target_every=4"],
}
STEPS = 256
TIMING = ("fps", "elapsed_s")
#: The curve columns' names when the digests were recorded (the episode metrics
#: have since taken the names of summary.json; the values are unchanged).
RECORDED_NAMES = {new: old for old, new in RENAMED_METRICS.items()}


def versions() -> dict[str, str]:
    """What the digests depend on besides the code and the CPU."""
    return {"torch": torch.__version__, "numpy": np.__version__}


def cpu() -> str:
    """The instruction set torch dispatches to here (AVX2, AVX512, ...)."""
    return torch.backends.cpu.get_cpu_capability()


def vendor() -> str:
    """The CPU's vendor (GenuineIntel, AuthenticAMD, ...; "" where unknown): MKL picks
    other kernels on AMD than on Intel at the same instruction set."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return ""


def recorded_cases(recorded: dict) -> dict | None:
    """The digests for this CPU: its own recording (instruction set and vendor, then the
    instruction set alone, as first recorded), else the plain ``cases`` (if any)."""
    by_cpu = recorded.get("by_cpu", {})
    return (by_cpu.get(f"{cpu()}/{vendor()}") or by_cpu.get(cpu())
            or recorded.get("cases"))


def learning_digest(algo: str, out: Path) -> dict[str, str]:
    """Train ``algo`` briefly into ``out``; digests of its curve rows and final weights."""
    from agents.__main__ import main
    from agents.checkpoint import load_checkpoint

    torch.set_num_threads(1)
    argv = ["train", str(ROOT / SCENARIO), "--out", str(out), "--algo", algo,
            "--actions", "select", "--window", "16", "--episode-jobs", "32",
            "--steps", str(STEPS), "--seed", "3", "--quiet", *CASES[algo]]
    assert main(argv) == 0
    state, _ = load_checkpoint(out)
    rows = [{RECORDED_NAMES.get(k, k): v for k, v in row.items() if k not in TIMING}
            for row in state["curve"]]
    # As JSON text, so that NaN compares equal to NaN and floats keep every bit (repr).
    curve = json.dumps(rows, sort_keys=True)
    weights = hashlib.sha256()
    for name, tensor in state["model"].items():
        weights.update(name.encode())
        weights.update(tensor.detach().cpu().numpy().tobytes())
    return {"curve": hashlib.sha256(curve.encode()).hexdigest(),
            "weights": weights.hexdigest(), "updates": str(len(rows))}


@pytest.mark.parametrize("algo", list(CASES))
def test_learning_curve_matches_its_digest(algo, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    recorded = json.loads(DIGESTS.read_text(encoding="utf-8"))
    if recorded["versions"] != versions():
        pytest.skip(f"digests recorded with {recorded['versions']}, running {versions()}")
    cases = recorded_cases(recorded)
    if cases is None:
        pytest.skip(f"no digests recorded on a {cpu()} CPU (recorded: "
                    f"{', '.join(recorded.get('by_cpu', {}))})")
    got = learning_digest(algo, tmp_path / algo)
    assert got == cases[algo], (
        f"{algo}: the learning curve or the weights changed; if deliberate, re-record with "
        "`python tests/test_learning_digests.py --record` and say why")


def _record() -> None:
    import os
    import tempfile

    os.chdir(ROOT)
    cases = {}
    with tempfile.TemporaryDirectory() as tmp:
        for algo in CASES:
            cases[algo] = learning_digest(algo, Path(tmp) / algo)
            print(algo, cases[algo])
    # A deliberate change re-records on this CPU; recordings of other CPUs are
    # dropped (they would hold the old behaviour's floats), so the test skips
    # there until someone records on one.
    DIGESTS.write_text(json.dumps({"versions": versions(), "by_cpu": {cpu(): cases}},
                                  indent=1) + "\n", encoding="utf-8")


def _record_this_cpu() -> None:
    import os
    import tempfile

    os.chdir(ROOT)
    recorded = json.loads(DIGESTS.read_text(encoding="utf-8"))
    if recorded["versions"] != versions():
        sys.exit(f"digests recorded with {recorded['versions']}, running {versions()}: "
                 "re-record all with --record")
    with tempfile.TemporaryDirectory() as tmp:
        cases = {algo: learning_digest(algo, Path(tmp) / algo) for algo in CASES}
    # The same code on another CPU: this CPU's floats join the others' (nothing dropped).
    recorded.setdefault("by_cpu", {})[f"{cpu()}/{vendor()}"] = cases
    DIGESTS.write_text(json.dumps(recorded, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] in (["--record"], ["--record-this-cpu"]):
        sys.path.insert(0, str(ROOT))
        _record() if sys.argv[1] == "--record" else _record_this_cpu()
    else:
        sys.exit("usage: python tests/test_learning_digests.py --record | --record-this-cpu\n"
                 "  --record: after a deliberate change (drops other CPUs' recordings)\n"
                 "  --record-this-cpu: the code unchanged, a CPU without its own recording")
