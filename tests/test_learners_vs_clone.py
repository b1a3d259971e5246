"""A learner against its clone (benchmarks/learners_vs_clone.py): the paired statistics of
:mod:`agents.reproductions`, the docs section, the test pass, the script's bad input."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents import reproductions as repro
from cosim.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


def test_equal_means_per_seed_are_a_zero_difference_not_a_win():
    # Seed 1: windows 1 vs 2 (win) and 3 vs 2 (loss), means equal; seed 2: ties.
    s = repro.paired_stats([[1.0, 3.0], [2.0, 2.0]], [[2.0, 2.0], [2.0, 2.0]])
    assert s["per_seed"] == [0.0, 0.0]
    assert (s["mean"], s["low"], s["high"]) == (0.0, 0.0, 0.0)
    assert (s["window_wins"], s["window_losses"], s["seed_wins"], s["seed_losses"]) == (1, 1, 0, 0)
    assert s["beats"] is False


def test_an_agent_better_on_every_seed_beats_its_clone():
    clone = np.full((5, 3), 10.0)
    factors = np.array([0.8, 0.9, 0.7, 0.85, 0.75])      # per-seed differences -20 .. -30 %
    s = repro.paired_stats(clone * factors[:, None], clone)
    assert s["per_seed"] == pytest.approx(list(factors - 1), abs=1e-12)
    assert s["mean"] == pytest.approx(-0.2, abs=1e-12)
    assert -0.3 <= s["low"] < s["mean"] < s["high"] <= -0.1
    assert s["beats"] is True and s["seed_wins"] == 5 and s["window_wins"] == 15


def test_one_seed_has_no_interval_and_never_beats():
    s = repro.paired_stats([[1.0, 1.0]], [[2.0, 2.0]])
    assert s["per_seed"] == [-0.5] and math.isnan(s["high"]) and s["beats"] is False


def test_windows_that_do_not_pair_are_refused_with_the_shapes():
    with pytest.raises(InputError, match=r"shapes \(2, 3\) and \(2, 2\)"):
        repro.paired_stats(np.ones((2, 3)), np.ones((2, 2)))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.floats(1.0, 100.0), min_size=3, max_size=3), min_size=2, max_size=4),
       st.lists(st.lists(st.floats(1.0, 100.0), min_size=3, max_size=3), min_size=2, max_size=4))
def test_swapping_agent_and_clone_swaps_wins_and_losses(a, c):
    n = min(len(a), len(c))
    a, c = np.array(a[:n]), np.array(c[:n])
    s, t = repro.paired_stats(a, c), repro.paired_stats(c, a)
    assert (s["window_wins"], s["window_losses"]) == (t["window_losses"], t["window_wins"])
    assert (s["seed_wins"], s["seed_losses"]) == (t["seed_losses"], t["seed_wins"])
    assert s["window_wins"] + s["window_losses"] + int(np.sum(a == c)) == a.size
    # A relative difference x one way is 1 / (1 + x) - 1 the other way.
    for x, y in zip(s["per_seed"], t["per_seed"], strict=True):
        assert 1 + y == pytest.approx(1 / (1 + x), rel=1e-9)


def test_the_section_is_replaced_in_place_and_appended_once(tmp_path):
    table = tmp_path / "r.md"
    table.write_text("# R\n\n| seed | x |\n|---|---|\n| 000 | a |\n")
    begin, end = "<!-- x: begin -->", "<!-- x: end -->"
    repro.write_section("## first\nbody", begin, end, table)
    repro.write_section("## second", begin, end, table)
    text = table.read_text()
    assert text.count(begin) == 1 and "first" not in text
    assert text == f"# R\n\n| seed | x |\n|---|---|\n| 000 | a |\n\n{begin}\n## second\n{end}\n"


def test_the_command_leaves_out_the_output_folder():
    assert repro.command_line("learners_vs_clone.py",
                              ["--seeds", "5", "--out", "/tmp/x", "--no-table"]) == (
        "python benchmarks/learners_vs_clone.py --seeds 5")


def _save_net(folder, env, config, seed):
    import torch

    from agents.checkpoint import env_meta, save_checkpoint
    from agents.networks import make_network

    torch.manual_seed(seed)
    net = make_network(env.observation_space, env.action_space)
    save_checkpoint(folder, {"model": net.state_dict(), "update": 0, "global_step": 0},
                    {"algo": "ppo", "network": net.spec, "env": env_meta(config), "update": 0,
                     "global_step": 0})
    return str(folder)


def test_an_agent_tested_against_itself_differs_nowhere(tmp_path):
    # A tiny configuration: 24-job windows of the benchmark's own test generator.
    from agents.rl_policy import load_rl_policy
    from cosim.compose import make_env, pin_scales
    from cosim.workloads.lublin import lublin
    from cosim.workloads.windows import window

    config = repro.clone_env_config("saf+easy", window=8, episode_jobs=24)
    pin_scales(config).close()
    env = make_env(config, episode_jobs=24)
    a, b = _save_net(tmp_path / "a", env, config, 1), _save_net(tmp_path / "b", env, config, 2)
    jobs = lublin(48, procs=256, seed=3003)
    test = [window(jobs, 24, start=0), window(jobs, 24, start=24)]
    def play(agent, clone):
        return repro.play_against_clone(load_rl_policy(agent), load_rl_policy(clone),
                                        make_env(config, episode_jobs=24), test)

    same = play(a, a)
    assert same["differ"] == 0 and same["decisions"] > 0
    assert same["agent_bsld"] == same["clone_bsld"]
    other = play(b, a)
    assert other["decisions"] >= other["choices"] >= other["differ_choices"]
    assert other["differ"] == other["differ_choices"]   # one legal action: no disagreement
    assert other["clone_bsld"] == same["clone_bsld"]


def test_relative_differences_are_per_seed_ratios_of_means():
    assert repro.relative_differences([[1.0, 3.0], [3.0, 3.0]], [[2.0, 2.0], [2.0, 4.0]]) == [0.0, 0.0]
    assert repro.relative_differences([[3.0]], [[4.0]]) == [-0.25]
    with pytest.raises(ValueError, match="2 and 1 windows"):
        repro.relative_differences([[1.0, 2.0]], [[1.0]])
    assert repro.fmt_pct_ci([-0.25]) == "-25.0 %"
    assert repro.fmt_pct_ci([0.1, 0.1]) == "+10.0 % [+10.0 %, +10.0 %]"


def test_the_clone_keeper_saves_the_first_policy_scored(tmp_path):
    import torch

    from agents.checkpoint import env_meta
    from agents.networks import make_network
    from agents.rl_policy import RLPolicy, load_rl_policy
    from cosim.compose import make_env, pin_scales

    config = repro.clone_env_config("saf+easy", window=8, episode_jobs=24)
    pin_scales(config).close()
    env = make_env(config, episode_jobs=24)
    policies = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        net = make_network(env.observation_space, env.action_space)
        policies.append(RLPolicy(net, {"algo": "ppo", "network": net.spec,
                                       "env": env_meta(config)}))
    scores = iter([(3.0, "three"), (2.0, "two")])
    keeper = repro.CloneKeeper(lambda policy: next(scores))
    assert keeper(policies[0]) == (3.0, "clone: three")
    assert keeper(policies[1]) == (2.0, "two")
    saved = load_rl_policy(keeper.save(tmp_path / "clone"))
    assert saved.update == 0 and saved.meta["validation_score"] == 3.0
    for key, value in policies[0].net.state_dict().items():
        assert torch.equal(saved.net.state_dict()[key], value)


def test_a_results_file_that_is_not_ours_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "results.json"
    bad.write_text('{"teacher": "saf+easy"}')
    before = (ROOT / "docs" / "reproductions.md").read_text()
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "learners_vs_clone.py"),
                          "--table-from", str(bad)], capture_output=True, text=True)
    assert run.returncode == 2
    err = run.stderr
    assert err.count("\n") == 1 and "expected a results.json written by this script" in err
    assert (ROOT / "docs" / "reproductions.md").read_text() == before
