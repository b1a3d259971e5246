"""``agents tune --beliefs --corrections``: what the policy plans with, chosen on validation."""

from __future__ import annotations

import json

import pytest

from agents.__main__ import main
from agents.tuning import tune
from cosim.compose import run_policy
from cosim.config import load_scenario
from cosim.workloads.loading import load_workload

SDSC = "SDSC-SP2-1998-4.2-cln.swf.gz"


@pytest.fixture
def sdsc(shared):
    path = shared / "traces" / SDSC
    if not path.exists():
        pytest.skip(f"trace not found: {path}")
    return path


def _sets(trace, jobs=3000):
    return [f"workload.path={trace}", f"workload.jobs={jobs}"]


def test_the_beliefs_are_rows_of_validation_and_the_choice_is_its_minimum(sdsc, tmp_path):
    out = tmp_path / "tuned"
    lines: list[str] = []
    r = tune("scenarios/swf.yaml", _sets(sdsc), 10.0, out, window_jobs=150, train_windows=2,
             count=4, generations=1, keep=1, processes=1, max_wait=2.0,
             beliefs=("requests", "history"),
             corrections=("overrun", "stepup"), echo=lines.append)
    rows = r["beliefs"]["validation"]
    assert sorted(rows) == sorted(f"{h}@history/{c}" for c in ("overrun", "stepup")
                                  for h in ("fcfs+easy", "sjf+easy", "saf+easy", "f1+easy",
                                            "wfp3+easy", "unicef+easy"))
    bound = r["max_wait_bound"]["ratio"] * r["validation_max_wait"]["fcfs+easy"]
    eligible = {k: v["mean_bsld"] for k, v in rows.items() if v["max_wait"] <= bound}
    assert all(v["within_bound"] == (k in eligible) for k, v in rows.items())
    chosen = r["chosen"]
    if chosen in rows:      # a belief row won: the lowest eligible, below the requests pick
        assert rows[chosen]["mean_bsld"] == min(eligible.values())
        assert r["beliefs"]["predictor"] == "history"
        assert r["beliefs"]["correction"] == rows[chosen]["correction"]
    else:
        assert min(eligible.values()) >= r["validation_mean_bsld"][chosen]
        assert r["beliefs"]["predictor"] == "estimate"
    assert r["beliefs"]["searched"] == {"beliefs": ["requests", "history"],
                                        "corrections": ["overrun", "stepup"]}
    assert any(line.startswith("validation mean bsld under the beliefs: ") for line in lines)
    card = (out / "card.md").read_text()
    assert f"`@{r['beliefs']['predictor']}`" in card and "history x overrun, stepup" in card
    policy = json.loads((out / "policy.json").read_text())
    if chosen in rows:
        assert policy == {"kind": "heuristic", "name": rows[chosen]["policy"],
                          "predictor": "history", "correction": rows[chosen]["correction"]}


def test_learned_dir_plans_with_the_folder_s_predictor_and_correction(sdsc, tmp_path):
    folder = tmp_path / "tuned"
    folder.mkdir()
    (folder / "policy.json").write_text(json.dumps(
        {"kind": "heuristic", "name": "saf+easy", "predictor": "history",
         "correction": "request"}))
    scenario = load_scenario("scenarios/swf.yaml", _sets(sdsc, 1500))
    workload = load_workload(scenario)
    learned = run_policy(scenario, f"learned:{folder}", None, workload=workload)
    same = run_policy(scenario.model_copy(update={"scheduler": scenario.scheduler.model_copy(
        update={"correction": "request"})}), "saf+easy@history", None, workload=workload)
    plain = run_policy(scenario, "saf+easy@history", None, workload=workload)
    keys = ("bsld_mean", "wait_mean", "wait_max", "overruns")
    assert [learned[k] for k in keys] == [same[k] for k in keys]
    assert [learned[k] for k in keys] != [plain[k] for k in keys]    # overrun: the default


def test_an_unknown_belief_is_one_clear_line(tmp_path, capsys):
    code = main(["tune", "scenarios/lublin256.yaml", "--minutes", "1", "--out",
                 str(tmp_path / "o"), "--beliefs", "requests", "oracle"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["error: --beliefs: expected one of requests, history, xgboost, "
                                 "got 'oracle'"]
    assert not (tmp_path / "o").exists()


def test_the_trace_model_with_a_models_folder_is_refused_in_one_line(lublin_trace, tmp_path,
                                                                     capsys):
    code = main(["tune", "scenarios/lublin256.yaml", "--set", f"predictor.models={tmp_path}",
                 "--minutes", "1", "--out", str(tmp_path / "o"), "--beliefs", "xgboost"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("error: --beliefs: expected a trace (swf, slurm) without "
                             "predictor.models") and "with predictor.models" in err[0]


def test_history_without_users_is_refused_before_any_search(lublin_trace, tmp_path, capsys):
    code = main(["tune", "scenarios/lublin256.yaml", "--minutes", "1", "--out",
                 str(tmp_path / "o"), "--beliefs", "requests", "history"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "@history would share one history" in err[0]
    assert not (tmp_path / "o").exists()


def test_a_correction_without_a_belief_is_one_clear_line(tmp_path, capsys):
    code = main(["tune", "scenarios/lublin256.yaml", "--minutes", "1", "--out",
                 str(tmp_path / "o"), "--corrections", "stepup"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["error: --corrections: expected a belief besides requests "
                                 "(--beliefs requests history), got stepup"]
