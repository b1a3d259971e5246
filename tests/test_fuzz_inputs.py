"""Fuzzing the entry points: generated values at and past every limit, nested
documents, huge integers and special files, for the three CLIs. Each either
is accepted or refused with one line and exit code 2, never a traceback.

Bounded in time: the scenario values go through the loader (no run); the
CLIs get a handful of generated documents each.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cosim import limits
from cosim.config import load_scenario
from cosim.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
LUBLIN = str(ROOT / "scenarios" / "lublin256.yaml")

#: Scenario keys with a number, and values around and past their limits.
NUMERIC_KEYS = [
    "cluster.nodes", "cluster.cores_per_node", "cluster.memory_per_node", "seed",
    "workload.jobs", "workload.offset", "faults.mtbf", "faults.mttr", "faults.start_limit",
    "faults.max_attempts", "scheduler.overrun_fraction", "scheduler.overrun_min_extension",
    "predictor.update_interval", "predictor.train_seed", "prediction_service.timeout_s",
    "prediction_service.simulated_latency", "metrics.tau", "output.until",
]
EDGES = st.sampled_from([
    "0", "-1", "1", "59.9", "60", "0.001", "1e-6", "1e308", "-1e308", ".inf", "-.inf", ".nan",
    str(2**63 - 1), str(2**63), str(-(2**63) - 1), "9" * 30, "1000000", "1000001",
    "2.5", "true", "'x'", "[]", "{}", "[1, 2]", "null",
])
NUMBERS = st.one_of(st.integers(-(2**70), 2**70).map(str),
                    st.floats(allow_nan=True, allow_infinity=True).map(
                        lambda x: ".nan" if math.isnan(x) else
                        (".inf" if x == math.inf else "-.inf" if x == -math.inf else repr(x))))


def _is_one_line(exc: InputError) -> bool:
    text = str(exc)
    return "\n" not in text and len(text) < 2000


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(NUMERIC_KEYS), value=st.one_of(EDGES, NUMBERS))
def test_scenario_values_load_or_are_one_line(key, value):
    try:
        sc = load_scenario(LUBLIN, [f"{key}={value}"])
    except InputError as exc:
        assert _is_one_line(exc), str(exc)
        return
    # accepted: within every limit, integers in int64, numbers that are numbers
    assert limits.NODES.value >= sc.cluster.nodes > 0
    assert limits.CORES_PER_NODE.value >= sc.cluster.cores_per_node > 0
    assert sc.faults.mtbf == 0 or sc.faults.mtbf >= limits.MIN_MTBF
    assert sc.predictor.update_interval >= limits.MIN_UPDATE_INTERVAL
    assert math.isfinite(sc.scheduler.overrun_fraction)
    assert math.isfinite(sc.cluster.memory_per_node)
    assert limits.INT64_MIN <= sc.seed <= limits.INT64_MAX


def _nested(depth: int, flow: bool) -> str:
    if flow:
        return "[" * depth + "]" * depth
    return "\n".join("  " * i + f"k{i}:" for i in range(depth)) + " 1\n"


# Depths past the interpreter's recursion limit (1,000) are enough to show the
# guard: a naive loader would raise RecursionError there.
@settings(max_examples=20, deadline=None)
@given(depth=st.integers(1, 1500), flow=st.booleans())
def test_nested_documents_load_or_are_refused_by_depth(depth, flow):
    text = _nested(depth, flow)
    try:
        doc = limits.load_yaml(text, "doc")
    except limits.LimitError as exc:
        assert depth > limits.DEPTH.value - 1 and "COSIM_MAX_DEPTH=N" in str(exc)
        return
    assert not limits.deeper_than(doc, limits.DEPTH.value)
    if flow:
        try:
            limits.parse_json(text, "doc.json")
        except limits.LimitError:
            assert depth > limits.DEPTH.value


def _one_line_exit(capsys, main, argv) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code != 0:
        assert code == 2 and len(err.strip().splitlines()) == 1, err


@pytest.fixture
def special_files(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return [str(fifo), "/dev/zero", "/dev/null", str(tmp_path)]


def test_special_files_for_every_cli(capsys, special_files):
    from agents.__main__ import main as agents_main
    from cosim.__main__ import main as cosim_main
    from predictors.__main__ import main as predictors_main

    for path in special_files:
        _one_line_exit(capsys, cosim_main, ["validate", path])
        _one_line_exit(capsys, cosim_main, ["report", path])
        _one_line_exit(capsys, agents_main, ["train", path, "--steps", "1"])
        _one_line_exit(capsys, predictors_main, ["evaluate", "--data", path, "--models", path])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(st.integers(2**63 - 2, 2**80), st.integers(-(2**80), -1)))
def test_huge_integer_options_for_every_cli(capsys, value):
    from agents.__main__ import main as agents_main
    from cosim.__main__ import main as cosim_main
    from predictors.__main__ import main as predictors_main

    _one_line_exit(capsys, cosim_main, ["validate", LUBLIN, "--set", f"cluster.nodes={value}"])
    if value > limits.INT64_MAX or value < 0:
        _one_line_exit(capsys, agents_main, ["train", LUBLIN, "--seed", str(value)])
        _one_line_exit(capsys, predictors_main, ["generate", "--jobs", "5", "--seed", str(value),
                                                 "--out", "/nonexistent/x"])
