"""The one engine for many simulations (cosim.engine): order, shared state, workers that
die, the bound on workers."""

from __future__ import annotations

import os
import signal

import pytest

from cosim.engine import Engine, EngineError, check_processes, max_processes
from cosim.errors import InputError


def scaled(state, task):
    """The task times the shared state, with the worker's pid."""
    return state * task, os.getpid()


def dies_on_three(state, task):
    if task == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return task


@pytest.mark.parametrize("processes", [1, 2])
def test_results_come_in_the_order_of_the_tasks(processes):
    tasks = [5, 1, 4, 2, 3, 0, 9, 7]
    with Engine(10, processes) as engine:
        out = engine.map(scaled, tasks)
    assert [value for value, _ in out] == [10 * t for t in tasks]
    pids = {pid for _, pid in out}
    assert (pids == {os.getpid()}) == (processes == 1)


def test_stream_calls_before_in_order_and_says_what_runs():
    seen, running = [], []
    with Engine(2) as engine:
        out = list(engine.stream(scaled, [3, 1, 2], before=seen.append, running=running.append))
    assert seen == [3, 1, 2] and [(t, v) for t, (v, _) in out] == [(3, 6), (1, 2), (2, 4)]
    assert running[-1] == 0 and 1 in running


def test_a_worker_that_dies_is_one_line():
    with Engine(None, 2) as engine, pytest.raises(EngineError) as err:
        engine.map(dies_on_three, range(6))
    assert "a worker process died" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("value, expected", [(0, "at least 1"),
                                             (None, None)])
def test_the_bound_on_workers(value, expected):
    if expected is None:
        assert check_processes(value) is None
        return
    with pytest.raises(InputError, match=expected):
        check_processes(value)


def test_more_workers_than_the_bound_is_refused_in_one_line():
    assert check_processes(max_processes()) == max_processes()
    with pytest.raises(InputError) as err:
        check_processes(max_processes() + 1, where="--processes")
    assert str(err.value).startswith(f"--processes: expected at most {max_processes()} (4 per CPU")


def triple(x):
    return 3 * x


@pytest.mark.parametrize("processes", [1, 2])
def test_run_each_maps_a_plain_function_in_order(processes):
    from cosim.engine import run_each

    assert run_each(triple, [4, 1, 3], processes) == [12, 3, 9]
