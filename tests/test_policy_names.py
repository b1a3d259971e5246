"""The policy-name grammar: one parser, clear errors that say where the name was written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cosim.compose import parse_policies
from cosim.config import load_scenario, scenario_from_dict
from cosim.errors import ScenarioError
from cosim.policies import PREDICTORS, make_policy, parse_policy

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name,kind,order,predictor,kill", [
    ("fcfs+easy", "queue", "fcfs+easy", None, False),
    ("f1", "queue", "f1+none", None, False),
    ("Largest", "queue", "largest+greedy", None, False),
    ("sjf+easy@xgboost", "queue", "sjf+easy", "xgboost", False),
    ("fcfs+easy@rnn+kill", "queue", "fcfs+easy", "rnn", True),
    (" saf+conservative@history ", "queue", "saf+conservative", "history", False),
    ("knapsack", "selector", "knapsack", None, False),
    ("knapsack@xgboost", "selector", "knapsack", "xgboost", False),
    ("rl:runs/ppo", "agent", "rl:runs/ppo", None, False),
    ("rl:runs/ppo@rnn+kill", "agent", "rl:runs/ppo", "rnn", True),
    ("rl:runs/a@b", "agent", "rl:runs/a@b", None, False),   # '@' inside a path
    ("saf+relaxed", "queue", "saf+relaxed=1", None, False),
    ("SJF+Relaxed=2.50@xgboost", "queue", "sjf+relaxed=2.5", "xgboost", False),
    ("saf+drain", "queue", "saf+drain=100:30", None, False),
    ("F1+Drain=30:7.5", "queue", "f1+drain=30:7.5", None, False),
])
def test_names_parse_into_one_structured_spec(name, kind, order, predictor, kill):
    spec = parse_policy(name)
    assert (spec.kind, spec.order, spec.predictor, spec.kill) == (kind, order, predictor, kill)
    assert spec.name == name.strip()


@pytest.mark.parametrize("name,fragment", [
    ("best", "expected one of fcfs, lcfs"),
    ("sjf+lazy", "a backfilling variant among none, greedy, easy, conservative"),
    ("knapsack+easy", "knapsack alone"),
    ("sjf+easy@oracle", "PREDICTOR one of estimate, history, xgboost, rnn"),
    ("saf+relaxed=-1", "+relaxed or +relaxed=SLACK with SLACK a number from 0 to 1000"),
    ("saf+relaxed=inf", "+relaxed or +relaxed=SLACK with SLACK a number from 0 to 1000"),
    ("fcfs+relaxed=1e308", "+relaxed or +relaxed=SLACK with SLACK a number from 0 to 1000"),
    ("fcfs+relaxed=1000.5", "+relaxed or +relaxed=SLACK with SLACK a number from 0 to 1000"),
    ("saf+relaxed=", "+relaxed or +relaxed=SLACK with SLACK a number from 0 to 1000"),
    ("saf+relaxing", "easy, conservative, relaxed[=SLACK], or drain[=D[:DAYS]]"),
    ("saf+drain=0", "+drain, +drain=D or +drain=D:DAYS with D > 0 and DAYS >= 0"),
    ("saf+drain=10:-1", "+drain, +drain=D or +drain=D:DAYS with D > 0 and DAYS >= 0"),
    ("saf+drain=x:3", "+drain, +drain=D or +drain=D:DAYS with D > 0 and DAYS >= 0"),
    ("saf+drainage", "+drain, +drain=D or +drain=D:DAYS with D > 0 and DAYS >= 0"),
    ("sjf+easy@xgboost+kill", "+kill only with @rnn"),
    ("sjf+easy@rnn+murder", "PREDICTOR one of"),
    ("rl:", "rl:DIR with DIR a checkpoint folder"),
    ("", "a policy name"),
])
def test_bad_names_say_what_was_expected_and_where(name, fragment):
    with pytest.raises(ScenarioError) as err:
        parse_policy(name, where="here.yaml: scheduler.policies[1]")
    text = str(err.value)
    assert text.startswith("here.yaml: scheduler.policies[1]: expected ") and fragment in text


def test_the_scenario_default_predictor_fills_in():
    sc = scenario_from_dict({"workload": {"kind": "vasp", "jobs": 5},
                             "predictor": {"runtime": "rnn", "kill": {"enabled": True}}})
    plain, explicit = parse_policies(["sjf+easy", "sjf+easy@xgboost"], sc)
    assert (plain.predictor, plain.kill) == ("rnn", True)
    assert (explicit.predictor, explicit.kill) == ("xgboost", False)


def test_make_policy_ignores_the_predictor_part_and_refuses_agents():
    assert make_policy("sjf+easy@xgboost").name == make_policy("sjf+easy").name == "sjf+easy"
    with pytest.raises(ScenarioError, match="loaded by cosim.compose"):
        make_policy("rl:runs/x")


def test_a_bad_name_in_a_scenario_file_names_the_file_and_entry(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("workload: {kind: lublin, jobs: 20}\n"
                    "scheduler: {policies: [fcfs+easy, sjf+esay]}\n")
    with pytest.raises(ScenarioError) as err:
        parse_policies(list(load_scenario(path).scheduler.policies), load_scenario(path),
                       source=str(path))
    assert str(err.value).startswith(f"{path}: scheduler.policies[1]: expected ")
    proc = subprocess.run([sys.executable, "-m", "cosim", "validate", str(path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert f"{path}: scheduler.policies[1]" in proc.stderr and "'sjf+esay'" in proc.stderr


def test_cli_flag_names_are_reported_as_the_flag(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "cosim", "run", "scenarios/lublin256.yaml",
                           "--policy", "sjf+esay", "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.startswith("error: --policy: expected ")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("scenario", sorted(p.name for p in (ROOT / "scenarios").glob("*.yaml")))
def test_every_shipped_scenario_validates(scenario, shared):
    proc = subprocess.run([sys.executable, "-m", "cosim", "validate", f"scenarios/{scenario}"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "# ok:" in proc.stdout


def test_policies_command_documents_the_whole_grammar():
    proc = subprocess.run([sys.executable, "-m", "cosim", "policies"], capture_output=True,
                          text=True, cwd=ROOT, check=True)
    out = proc.stdout
    assert "HEURISTIC[+BACKFILL][@PREDICTOR[+kill[=DIR]]]" in out and "rl:DIR" in out
    for token in ["fcfs", "knapsack", "+easy", "+conservative", "+kill", "+relaxed[=SLACK]",
                  "+drain[=D[:DAYS]]",
                  *(f"@{p}" for p in PREDICTORS)]:
        assert f"  {token} " in out, token


def test_relaxed_and_drain_names_build_their_easy():
    import simpy

    from cosim.model import build
    from cosim.policies.priority import PriorityWeights, heuristic_weights, make_priority_policy
    from cosim.workloads.loading import load_workload

    sc = load_scenario(str(ROOT / "scenarios/lublin256.yaml"), ["workload.jobs=600"])
    jobs = load_workload(sc)

    def starts(policy):
        env = simpy.Environment()
        sim = build(env, sc, policy, workload=jobs, record=False)
        env.run(until=sim.finished)
        return [j.start for j in sim.scheduler.jobs]
    p = make_policy("saf+relaxed=2")
    assert (p.name, p.backfill, p.slack) == ("saf+relaxed=2", "easy", 2.0)
    assert make_policy("saf+relaxed").slack == 1.0
    assert starts(make_policy("saf+relaxed=0")) == starts(make_policy("saf+easy"))
    relaxed = starts(p)
    assert relaxed == starts(make_priority_policy(PriorityWeights(heuristic_weights("saf", 256),
                                                                  256, slack=2.0)))
    assert relaxed != starts(make_policy("saf+easy"))
    # drain-aware EASY by name: the same schedule as the priority form of the same rule
    d = make_policy("saf+drain=3:0.5")
    assert (d.name, d.backfill, d.drain) == ("saf+drain=3:0.5", "easy", (3.0, 43200.0))
    drained = starts(d)
    assert drained == starts(make_priority_policy(PriorityWeights(
        heuristic_weights("saf", 256), 256, drain_factor=3.0, drain_grace=43200.0)))
    assert drained != starts(make_policy("saf+easy"))
