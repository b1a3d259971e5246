"""Tests of cosim.report on small results folders made with cosim.records."""

from __future__ import annotations

import heapq
import json
import re
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from cosim import records
from cosim.errors import InputError
from cosim.report import load_runs, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def synthetic_run(n: int, cores: int, seed: int) -> tuple[dict, dict, dict]:
    """A consistent strict-FCFS run of ``n`` random jobs; the last 2 never start."""
    rng = np.random.default_rng(seed)
    submit = np.cumsum(rng.exponential(60.0, n))
    run = np.round(rng.lognormal(5.0, 1.5, n), 1)
    procs = np.minimum(rng.integers(1, 2 * cores, n) // rng.integers(1, 9, n) + 1, cores)
    start = np.full(n, np.nan)
    running: list[tuple[float, int]] = []
    used, t = 0, -np.inf
    for j in range(n - 2):
        t = max(t, submit[j])
        while running and (running[0][0] <= t or used + procs[j] > cores):
            end, p = heapq.heappop(running)
            t, used = max(t, end), used - p
        start[j] = t
        used += procs[j]
        heapq.heappush(running, (t + run[j], int(procs[j])))
    started = np.isfinite(start)
    end = np.where(started, start + run, np.nan)
    outcome = np.where(started, "completed", "unfinished").astype(object)
    outcome[3] = "timeout"
    mode = np.where(started, rng.choice(["ready", "reserved", "backfilled"], n), "")
    jobs = {
        "job_id": np.arange(1, n + 1), "user": rng.integers(0, 20, n), "submit": submit,
        "start": start, "end": end, "run": np.where(started, run, np.nan),
        "req_time": run * 2, "estimate": run * 1.5, "procs": procs, "mem": np.zeros(n),
        "outcome": outcome.tolist(), "mode": mode.tolist(),
        "reason": np.where(started, "fits at head", "").tolist(),
        "attempts": started.astype(np.int32), "killed_seconds": np.zeros(n),
        "killed_core_seconds": np.zeros(n), "reservation": np.full(n, np.nan),
    }
    # events: submit (+1 queued), start (-1 queued, +1 running), end
    times = np.concatenate([submit, start[started], end[started]])
    order = np.concatenate([np.full(n, 2), np.ones(started.sum()), np.zeros(started.sum())])
    ids = np.concatenate([jobs["job_id"], jobs["job_id"][started], jobs["job_id"][started]])
    dq = np.concatenate([np.ones(n), -np.ones(started.sum()), np.zeros(started.sum())])
    dr = np.concatenate([np.zeros(n), np.ones(started.sum()), -np.ones(started.sum())])
    du = np.concatenate([np.zeros(n), procs[started], -procs[started]])
    area = jobs["estimate"] * procs
    da = np.concatenate([area, -area[started], np.zeros(started.sum())])
    idx = np.lexsort((order, times))
    kinds = np.array(["submit", "start", "end"])[(2 - order[idx]).astype(int)]
    m = len(idx)
    events = {
        "time": times[idx], "kind": kinds.tolist(), "job_id": ids[idx], "node": np.full(m, -1),
        "queue_len": np.cumsum(dq[idx]).astype(np.int64),
        "running": np.cumsum(dr[idx]).astype(np.int64),
        "used_cores": np.cumsum(du[idx]).astype(np.int64), "up_cores": np.full(m, cores),
        "queued_area": np.abs(np.cumsum(da[idx])), "idle_fit_cores": np.zeros(m, np.int64),
    }
    decisions = {"time": start[started], "job_id": jobs["job_id"][started],
                 "action": ["start"] * int(started.sum()),
                 "mode": mode[started].tolist(), "reason": ["fits at head"] * int(started.sum()),
                 "reserved_time": np.full(started.sum(), np.nan)}
    return jobs, events, decisions


def make_comparison(root: Path, policies: list[str], n: int = 40, cores: int = 16,
                    write_index: bool = True) -> Path:
    summaries = {}
    for i, name in enumerate(policies):
        jobs, events, decisions = synthetic_run(n, cores, seed=i)
        paths = records.write_run(root / name, jobs=jobs, events=events, decisions=decisions,
                                  cores=cores, policy=name)
        summaries[name] = records.read_json(paths["summary"])["metrics"]
    if write_index:
        records.write_json_atomic(root / "comparison.json", {
            "schema": "comparison/1", "policies": policies, "summaries": summaries})
    return root


def check_report(root: Path, names: list[str]) -> str:
    html = (root / "report.html").read_text()
    srcs = re.findall(r'<img src="([^"]+)"', html)
    pngs = sorted(p.name for p in root.glob("*.png"))
    assert sorted(srcs) == pngs and pngs, (srcs, pngs)
    for name in pngs:
        data = (root / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 2000, name
    for name in names:
        assert f"<th>{name}</th>" in html
    assert not [p.name for p in root.iterdir() if p.name.startswith(".")]
    return html


def test_comparison_report(tmp_path):
    root = make_comparison(tmp_path, ["fcfs", "easy", "rl-ppo"])
    out = write_report(root)
    assert out == root / "report.html"
    html = check_report(root, ["fcfs", "easy", "rl-ppo"])
    for fig in ("timeseries.png", "wait_bsld_cdf.png", "by_size_class.png", "modes.png",
                "gantt_fcfs.png", "gantt_easy.png", "gantt_rl-ppo.png"):
        assert f'src="{fig}"' in html
    # the metrics table shows the summary values, with the unfinished note
    assert "<th>wait_mean</th>" in html and "<th>bsld_mean</th>" in html
    assert "fcfs: 2 job(s) were still queued or running" in html
    runs = load_runs(root)
    assert [r.name for r in runs] == ["fcfs", "easy", "rl-ppo"]
    assert runs[0].summary["jobs_unfinished"] == 2


def test_single_run_without_summary_and_gantt_skipped(tmp_path):
    jobs, events, decisions = synthetic_run(30, 8, seed=5)
    meta = {"cores": 8, "policy": "sjf<1>", "tau": 10.0}
    records.write_table(tmp_path / "jobs.parquet", jobs, records.JOBS_SCHEMA, meta)
    records.write_table(tmp_path / "events.parquet", events, records.EVENTS_SCHEMA, meta)
    write_report(tmp_path, gantt_max_jobs=10)
    html = check_report(tmp_path, ["sjf&lt;1&gt;"])
    assert "sjf&lt;1&gt;: no Gantt chart (30 jobs, more than 10)" in html
    assert not list(tmp_path.glob("gantt_*"))
    # summary computed from the tables since there is no summary.json
    assert re.search(r"<th>jobs_total</th><td class=\"unit\">jobs</td><td>30</td>", html)


def test_subfolders_without_comparison_json(tmp_path):
    make_comparison(tmp_path, ["b_policy", "a_policy"], write_index=False)
    write_report(tmp_path)
    html = check_report(tmp_path, ["a_policy", "b_policy"])
    assert html.index("<th>a_policy</th>") < html.index("<th>b_policy</th>")


def test_comparison_json_as_mapping(tmp_path):
    make_comparison(tmp_path, ["x", "y"], write_index=False)
    # json.dumps, not write_json_atomic: that one sorts keys, and order matters here
    (tmp_path / "comparison.json").write_text(
        json.dumps({"policies": {"y": {"wait_mean": 1.0}, "x": {"wait_mean": 2.0}}}))
    runs = load_runs(tmp_path)
    # the policy's own summary.json wins over the comparison entry
    assert [r.name for r in runs] == ["y", "x"]
    assert runs[0].summary["jobs_total"] == 40


def test_bad_folders(tmp_path):
    with pytest.raises(InputError, match="expected a results folder, got no such folder"):
        write_report(tmp_path / "missing")
    with pytest.raises(InputError, match="got no jobs.parquet, comparison.json or run subfolders"):
        write_report(tmp_path)
    (tmp_path / "comparison.json").write_text(json.dumps({"policies": ["ghost"]}))
    with pytest.raises(InputError, match=r"comparison.json:ghost: expected a policy subfolder"):
        write_report(tmp_path)
    (tmp_path / "comparison.json").write_text(json.dumps({"runs": []}))
    with pytest.raises(InputError, match="got no 'policies' key"):
        write_report(tmp_path)


@pytest.mark.parametrize(("text", "found"), [
    ("a: [1, 2\n  b: {{{\n", ":2: expected the scenario.yaml a run saves (a YAML mapping of "
                              "scenario keys), got invalid YAML"),
    ("- a list\n", ": expected the scenario.yaml a run saves (a YAML mapping of scenario keys), "
                   "got a YAML list"),
    ("", ": expected the scenario.yaml a run saves (a YAML mapping of scenario keys), "
         "got an empty file"),
    (b"\xff\xfe garbage", ": expected the scenario.yaml a run saves (a YAML mapping of "
                           "scenario keys), got a byte that is not UTF-8 at offset 0"),
])
def test_a_garbage_saved_scenario_is_one_line_naming_it_before_any_figure(tmp_path, text, found):
    root = make_comparison(tmp_path / "res", ["fcfs", "sjf"])
    path = root / "scenario.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(InputError) as err:
        write_report(root)
    assert str(err.value).startswith(f"{path}{found}")
    assert not list(root.glob("*.png")) and not (root / "report.html").exists()
    path.write_text("name: fine\ndescription: a saved scenario\n")
    assert "a saved scenario" in write_report(root).read_text()


def test_report_on_wrong_file(tmp_path):
    (tmp_path / "jobs.parquet").write_text("not parquet")
    with pytest.raises(InputError, match="got a file that is not Parquet"):
        write_report(tmp_path)


@pytest.mark.benchmark
def test_report_speed_10k(tmp_path):
    make_comparison(tmp_path, ["fcfs", "easy"], n=10_000, cores=256)
    t0 = time.perf_counter()
    write_report(tmp_path)
    elapsed = time.perf_counter() - t0
    html = check_report(tmp_path, ["fcfs", "easy"])
    assert "no Gantt chart (10000 jobs" in html
    print(f"write_report on 2 x 10k jobs: {elapsed:.2f} s")
    assert elapsed < 10.0


def test_run_with_no_finished_job_and_no_events(tmp_path):
    jobs, _, _ = synthetic_run(6, 4, seed=2)
    n = 6
    jobs.update(start=np.full(n, np.nan), end=np.full(n, np.nan), run=np.full(n, np.nan),
                outcome=["unfinished"] * n, mode=[""] * n,
                attempts=np.zeros(n, np.int32))
    records.write_table(tmp_path / "jobs.parquet", jobs, records.JOBS_SCHEMA,
                        {"cores": 4, "policy": "idle"})
    write_report(tmp_path)
    html = check_report(tmp_path, ["idle"])
    assert "No utilization and queue length over time: no events table." in html
    assert not (tmp_path / "timeseries.png").exists()
    assert "idle: 6 job(s) were still queued or running" in html


def test_report_removes_stale_figures_and_temporary_files(tmp_path):
    from cosim.compose import run_scenario
    from cosim.config import load_scenario

    root = Path(__file__).resolve().parents[1]
    sc = load_scenario(root / "scenarios" / "lublin256.yaml", ["workload.jobs=40"])
    run_scenario(sc, ["fcfs+easy"], tmp_path / "r", plots=False, progress=False, echo=None,
                 notify=None)
    (tmp_path / "r" / "gantt_gone_policy.png").write_bytes(b"old")
    (tmp_path / "r" / ".timeseries.png.tmp.png").write_bytes(b"half")
    write_report(tmp_path / "r")
    names = {p.name for p in (tmp_path / "r").iterdir()}
    assert "gantt_gone_policy.png" not in names and ".timeseries.png.tmp.png" not in names
    assert "gantt_fcfs_easy.png" in names


def _figures(monkeypatch):
    """Capture every figure the report draws, before it is closed."""
    import cosim.report.figures as report  # the module whose figures call _save

    captured = {}
    real = report._save

    def save(fig, path):
        fig.canvas.draw()
        captured[Path(path).name.lstrip(".").removesuffix(".tmp.png")] = fig
        real(fig, path)
    monkeypatch.setattr(report, "_save", save)
    return captured


def _overlaps(texts) -> list:
    boxes = [(t.get_text(), t.get_window_extent()) for t in texts if t.get_text()]
    return [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:]
            if ba.overlaps(bb)]


def test_mode_labels_never_overlap_and_utilization_has_a_strip_per_policy(tmp_path,
                                                                          monkeypatch):
    # seven policies with real names (their runs synthetic: the layout is what is checked)
    policies = ["fcfs+easy", "sjf+conservative", "largest+greedy", "wfp3+easy",
                "unicef+conservative", "saf+easy", "f1+easy"]
    make_comparison(tmp_path / "r", policies, n=150, cores=64)
    figs = _figures(monkeypatch)
    write_report(tmp_path / "r")
    modes = figs["modes.png"]
    left, right = modes.axes[:2]
    names = [t.get_text() for t in left.get_yticklabels()]
    assert names == policies[::-1] or names == policies   # one row per policy
    texts = (left.get_yticklabels() + left.get_xticklabels() + right.get_xticklabels()
             + [left.title, right.title])
    assert _overlaps(texts) == []
    series = figs["timeseries.png"]
    assert len(series.axes) == len(policies) + 1          # a strip per policy, then the queue
    labels = [t.get_text() for ax in series.axes[1:] for t in ax.texts]
    assert [lb.split()[0] for lb in labels] == policies


# ------------------------------------------------ page structure (issue 21) ----

def _summary_with(root: Path, name: str, **values) -> None:
    """Overwrite metrics of one policy's summary.json (the page reads it)."""
    path = root / name / "summary.json"
    doc = records.read_json(path)
    doc["metrics"].update(values)
    records.write_json_atomic(path, doc)


def test_page_leads_with_headline_then_figures_then_folded_metrics(tmp_path):
    root = make_comparison(tmp_path, ["fcfs", "easy", "sjf"])
    # hand-set values: easy has the lowest mean wait, sjf the highest utilization,
    # fcfs and easy tie on max wait (both marked)
    _summary_with(root, "fcfs", wait_mean=300.0, wait_max=900.0, utilization=0.5,
                  workload_cleaning={}, workload_status={"1": 38, "5": 2},
                  sources=["de015ab1ef76+0da360c67966"])
    _summary_with(root, "easy", wait_mean=120.0, wait_max=900.0, utilization=0.6)
    _summary_with(root, "sjf", wait_mean=150.0, wait_max=1000.0, utilization=0.7)
    write_report(root, warnings=["2 of 40 jobs (5%) have no requested time"])
    page = (root / "report.html").read_text()
    at = {name: page.index(marker) for name, marker in (
        ("headline", 'id="headline"'), ("warnings", 'id="warnings"'),
        ("figures", 'id="figures"'), ("first image", "<img "),
        ("details", "<details"), ("full table", "<th>metric</th>"))}
    assert list(at) == sorted(at, key=at.get), at
    assert page.index("<img ") < at["details"]
    # the headline table: one row per policy, best values starred
    head = page[at["headline"]:page.index("</table>", at["headline"])]
    rows = re.findall(r"<tr><th>(\w+)</th>(.*?)</tr>", head)[1:]    # after the header row
    assert [r[0] for r in rows] == ["fcfs", "easy", "sjf"]
    best = {name: re.findall(r'class="best">&#9733; ([\d.,]+)<', cells) for name, cells in rows}
    assert "120" in best["easy"] and "120" not in best["fcfs"]
    assert "0.700" in best["sjf"] and "0.500" not in best["fcfs"]
    assert "900" in best["fcfs"] and "900" in best["easy"] and "1,000" not in best["sjf"]
    # no raw Python reprs anywhere, the list and mapping spelled out
    for raw in ("{}", "[]", "['", "{'", "': "):
        assert raw not in page, raw
    assert "de015ab1ef76+0da360c67966" in page and "1: 38, 5: 2" in page
    # units and definitions in the folded table
    assert re.search(r'<th>wait_mean</th><td class="unit">s</td>', page)
    assert re.search(r'<th>utilization</th><td class="unit">fraction</td>', page)
    assert "2 of 40 jobs (5%) have no requested time" in page
    # the Kiviat chart comes first among the figures
    srcs = re.findall(r'<img src="([^"]+)"', page)
    assert srcs[0] == "kiviat.png" and (root / "kiviat.png").read_bytes().startswith(PNG_MAGIC)


def test_kiviat_scores_by_hand():
    from cosim.report import kiviat_scores

    s = kiviat_scores([{"wait_mean": 100.0, "utilization": 0.4, "fairness_jain": None},
                       {"wait_mean": 400.0, "utilization": 0.8, "fairness_jain": 0.5},
                       {"wait_mean": 0.0, "utilization": 0.2}])
    assert s["wait_mean"] == [0.0, 0.0, 1.0]          # the best is 0: only 0 scores
    assert s["utilization"] == [0.5, 1.0, 0.25]
    assert s["fairness_jain"] == [None, 1.0, None]
    assert "bsld_mean" not in s
    s = kiviat_scores([{"bsld_mean": 2.0}, {"bsld_mean": 8.0}])
    assert s["bsld_mean"] == [1.0, 0.25]


def test_size_classes_fit_the_machine():
    from cosim.report import size_classes

    for cores in (1, 4, 20, 64, 192, 256, 1024, 8192):
        classes = size_classes(cores)
        assert classes[0][1] == 1 and classes[-1][2] == cores
        for (_, _, hi), (_, lo, _) in zip(classes, classes[1:]):
            assert lo == hi + 1                        # contiguous, no gap, no overlap
    assert [c[0] for c in size_classes(192)] == ["1", "2-3", "4-12", "13-48", "49-192"]


def test_metric_labels_have_units():
    from cosim.report import HEADLINE, metric_label, metric_unit

    assert metric_label("wait_mean") == "mean wait (s)"
    assert metric_label("utilization") == "utilization (useful) (fraction)"
    assert metric_label("wasted_core_hours") == "wasted core-hours (core-h)"
    assert metric_unit("busy_core_seconds") == "core-s"
    for key, *_ in HEADLINE:
        if key != "jobs_per_second":
            assert metric_unit(key), key


def test_gantt_marks_failed_timeout_and_restarted_jobs(tmp_path, monkeypatch):
    jobs, events, decisions = synthetic_run(30, 8, seed=3)
    jobs["outcome"][5] = "failed"
    jobs["killed_seconds"][7] = 100.0
    records.write_run(tmp_path, jobs=jobs, events=events, decisions=decisions, cores=8,
                      policy="p")
    figs = _figures(monkeypatch)
    write_report(tmp_path)
    ax = figs["gantt_p.png"].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "failed (dropped after a kill or failure): 1" in labels
    assert "killed at its walltime (timeout): 1" in labels
    assert "restarted after a killed/lost attempt: 1" in labels
    assert "unfinished when the run stopped: 2" in labels
    # the legend sits outside the axes, right of them
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1


def test_cdf_legend_is_below_the_axes(tmp_path, monkeypatch):
    make_comparison(tmp_path, ["a", "b", "c"])
    figs = _figures(monkeypatch)
    write_report(tmp_path)
    fig = figs["wait_bsld_cdf.png"]
    (legend,) = fig.legends
    top = legend.get_window_extent().y1
    assert all(top <= ax.get_window_extent().y0 for ax in fig.axes)
    for ax in fig.axes:
        assert "(" in ax.get_xlabel()    # a unit on every x axis


def test_warnings_and_never_started_jobs_stay_in_a_report_made_again(tmp_path):
    # cosim run passes its workload warnings; `cosim report DIR` later passes none
    # and must show the same box, with the jobs that never started from the summaries.
    root = make_comparison(tmp_path, ["fcfs", "easy"])
    _summary_with(root, "fcfs", jobs_never_started=0)
    _summary_with(root, "easy", jobs_never_started=3, jobs_total=40, jobs_given_up=2)
    line = "2 of 42 jobs dropped: 2 wider than the machine"
    never = "easy: 3 of 40 jobs never started (2 given up in the queue); reasons in jobs.parquet"
    for given in ([line], None):
        write_report(root, warnings=given)
        page = (root / "report.html").read_text()
        box = page[page.index('id="warnings"'):]
        box = box[:box.index("</div>")]
        assert re.findall(r"<li>(.*?)</li>", box) == [line, never]
    (root / "warnings.json").write_text('{"warnings": 3}')
    with pytest.raises(InputError, match="warnings.json: expected"):
        write_report(root)


# ------------------------------------------------ damaged inputs (fuzzer) ----

def test_deeply_nested_comparison_json(tmp_path):
    root = make_comparison(tmp_path, ["fcfs"])
    (root / "comparison.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match=r"comparison.json: expected a JSON document nested at "
                                         r"most 64 levels \(raise it with COSIM_MAX_DEPTH=N\), got JSON nested too deeply$"):
        write_report(root)


def test_metric_values_that_are_not_numbers(tmp_path):
    root = make_comparison(tmp_path, ["fcfs", "easy"])
    _summary_with(root, "easy", utilization={"a": 1})
    with pytest.raises(InputError, match=r"easy/summary.json: metrics.utilization: expected a "
                                         r"number or null, got \{'a': 1\}$"):
        write_report(root)
    _summary_with(root, "easy", utilization=0.5, wait_mean="abc")
    with pytest.raises(InputError, match=r"easy/summary.json: metrics.wait_mean: expected a "
                                         r"number or null, got 'abc'$"):
        write_report(root)
    _summary_with(root, "easy", wait_mean=True)
    with pytest.raises(InputError, match="metrics.wait_mean: expected a number or null, got True"):
        write_report(root)
    # null (cosim's spelling of an undefined metric) is still shown as missing
    _summary_with(root, "easy", wait_mean=None, fairness_jain=None)
    write_report(root)
    # comparison.json's summaries, used where a policy has no summary.json
    (root / "easy" / "summary.json").unlink()
    doc = records.read_json(root / "comparison.json")
    doc["summaries"]["easy"]["mode_jobs_ready"] = "most"
    records.write_json_atomic(root / "comparison.json", doc)
    with pytest.raises(InputError, match=r"comparison.json: summaries.easy.mode_jobs_ready: "
                                         r"expected a number or null, got 'most'$"):
        write_report(root)
    doc["summaries"]["easy"].update(mode_jobs_ready=0.5, cores=-5)
    records.write_json_atomic(root / "comparison.json", doc)
    with pytest.raises(InputError, match=r"comparison.json: summaries.easy.cores: expected a "
                                         r"positive integer, got -5$"):
        write_report(root)


def test_run_metadata_with_bad_cores_or_tau(tmp_path):
    jobs, events, _ = synthetic_run(20, 8, seed=1)
    records.write_table(tmp_path / "events.parquet", events, records.EVENTS_SCHEMA, {})
    for meta, error in (({"cores": "abc"}, "cosim.run.cores: expected a positive integer, "
                                           "got 'abc'"),
                        ({"cores": -5}, "cosim.run.cores: expected a positive integer, got -5"),
                        ({"cores": 8, "tau": "x"}, "cosim.run.tau: expected a positive number "
                                                   "of seconds, got 'x'"),
                        ([8, 10.0], "cosim.run: expected a JSON object of run metadata")):
        path = records.write_table(tmp_path / "jobs.parquet", jobs, records.JOBS_SCHEMA, {})
        table = pq.read_table(path)
        raw = json.dumps(meta).encode()
        pq.write_table(table.replace_schema_metadata(
            {**table.schema.metadata, b"cosim.run": raw}), path)
        with pytest.raises(InputError, match=rf"^{re.escape(str(path))}: {re.escape(error)}"):
            write_report(tmp_path)


def test_table_errors_name_their_file(tmp_path):
    jobs, events, decisions = synthetic_run(20, 8, seed=1)
    records.write_run(tmp_path / "p", jobs=jobs, events=events, decisions=decisions, cores=8,
                      policy="p")
    events["time"][1] = events["time"][0] - 1.0   # time runs backwards
    records.write_table(tmp_path / "p" / "events.parquet", events, records.EVENTS_SCHEMA,
                        {"cores": 8, "policy": "p"})
    where = re.escape(str(tmp_path / "p" / "events.parquet"))
    # drawn from the events table (summary.json present), or summarized from it (absent)
    with pytest.raises(InputError, match=rf"^{where}: events.time\[1\]: expected rows in "
                                         r"non-decreasing time order"):
        write_report(tmp_path)
    (tmp_path / "p" / "summary.json").unlink()
    with pytest.raises(InputError, match=rf"^{where}: events.time\[1\]: expected"):
        write_report(tmp_path)
    jobs["start"][0] = np.nan       # a completed job that never started
    records.write_table(tmp_path / "p" / "jobs.parquet", jobs, records.JOBS_SCHEMA,
                        {"cores": 8, "policy": "p"})
    where = re.escape(str(tmp_path / "p" / "jobs.parquet"))
    with pytest.raises(InputError, match=rf"^{where}: jobs.start\[0\]: expected a finite time"):
        write_report(tmp_path)


@pytest.mark.parametrize("target", ["report.html", "timeseries.png", "warnings.json"])
def test_output_path_that_is_a_folder(tmp_path, capsys, target):
    from cosim.__main__ import main

    root = make_comparison(tmp_path, ["fcfs"])
    (root / target).mkdir()
    argv = ["report", str(root)]
    if target == "warnings.json":   # written only when cosim run passes its warnings
        with pytest.raises(InputError, match=rf"^{re.escape(str(root / target))}: expected a "
                                             "file path the report can write, got a folder$"):
            write_report(root, warnings=["w"])
    else:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == (f"error: {root / target}: expected a file path the report can write, "
                       "got a folder\n")
    assert not [p.name for p in root.iterdir() if p.name.startswith(".")]


def test_a_policy_dir_is_a_subfolder_by_name(tmp_path):
    # "dir" was used as given: "../x" or an absolute path read runs from outside
    root = make_comparison(tmp_path / "res", ["x"], write_index=False)
    make_comparison(tmp_path / "elsewhere", ["y"], write_index=False)
    for sub in ("../elsewhere/y", str(tmp_path / "elsewhere" / "y"), ".."):
        (root / "comparison.json").write_text(
            json.dumps({"policies": [{"policy": "x", "dir": sub}]}))
        with pytest.raises(InputError, match=r"comparison.json:policies\[0\].dir: expected the "
                                             r"name of a policy subfolder of the results folder"):
            load_runs(root)
    (root / "comparison.json").write_text(json.dumps({"policies": [{"policy": "x", "dir": "x"}]}))
    assert [r.name for r in load_runs(root)] == ["x"]


def test_a_policy_that_starves_is_marked_beside_its_mean_bsld(tmp_path):
    root = make_comparison(tmp_path, ["fcfs", "saf"])
    _summary_with(root, "fcfs", starved_1d=2, starved_1d_share=0.05, starved_1w=0,
                  starved_1w_share=0.0)
    _summary_with(root, "saf", starved_1d=4, starved_1d_share=0.1, starved_1w=1,
                  starved_1w_share=0.025)
    write_report(root)
    page = (root / "report.html").read_text()
    head = page[page.index('id="headline"'):page.index("</table>", page.index('id="headline"'))]
    header = re.findall(r"<th[^>]*>([^<]*)</th>", head.split("</tr>")[0])
    # starvation sits right after the means it qualifies
    assert header[1:8] == ["jobs", "mean bsld &darr;", "mean wait (s) &darr;",
                           "p99 wait (s) &darr;", "max wait (s) &darr;", "waited &gt;1d &darr;",
                           "waited &gt;1w &darr;"]
    rows = {name: mark for name, mark, _ in re.findall(r"<tr><th>(\w+)(.*?)</th>(.*?)</tr>",
                                                       head)[1:]}
    assert 'class="starves"' in rows["saf"] and 'class="starves"' not in rows["fcfs"]
    assert '<td class="starved">1 <span class="share">(2.5%)</span></td>' in head
    assert '&#9733; 2 <span class="share">(5.0%)</span>' in head   # fewest over a day
