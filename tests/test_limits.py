"""The limits of cosim.limits: each refused where the value enters, in one line
that names the limit and how to raise it (exit code 2, no traceback)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cosim import limits
from cosim.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
LUBLIN = str(ROOT / "scenarios" / "lublin256.yaml")


def one_line(capsys, main, argv, *fragments):
    """Run a CLI's ``main(argv)`` in-process: exit 2 and one stderr line holding ``fragments``."""
    try:
        code = main(argv)
    except SystemExit as exc:   # argparse
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1, err
    for fragment in fragments:
        assert fragment in err[0], err[0]
    return err[0]


def cosim_main(argv):
    from cosim.__main__ import main

    return main(argv)


def deep_json(levels: int) -> str:
    return "[" * levels + "]" * levels


#: Past Python's default recursion limit (1000 frames; PyYAML's composer takes more
#: than one per level), so these hit the RecursionError path. PyYAML's scanner is
#: quadratic in the depth: 5,000 levels took 29 s to refuse, 1,000 take 5 s.
PAST_RECURSION = 1_000


def test_limit_error_names_the_variable_and_the_environment_raises_it(monkeypatch):
    with pytest.raises(limits.LimitError, match=r"cluster.nodes: expected at most 1,000,000 "
                                                r"\(the limit on nodes in a cluster; raise it "
                                                r"with COSIM_MAX_NODES=N\), got 2,000,000"):
        limits.NODES.check(2_000_000, "cluster.nodes")
    monkeypatch.setenv("COSIM_MAX_NODES", "3000000")
    assert limits.NODES.check(2_000_000, "cluster.nodes") == 2_000_000
    monkeypatch.setenv("COSIM_MAX_NODES", "lots")
    with pytest.raises(InputError, match="COSIM_MAX_NODES: expected a whole number above 0"):
        limits.NODES.check(1, "x")


def test_int64_range():
    assert limits.check_int64(2**63 - 1, "seed") == 2**63 - 1
    with pytest.raises(limits.LimitError, match=r"seed: expected a whole number within int64"):
        limits.check_int64(2**63, "seed")
    assert limits.out_of_int64(-(2**63) - 1) and not limits.out_of_int64(True)


@pytest.mark.parametrize("override,fragments", [
    # an AssertionError on main
    ("cluster.nodes=99999999999999999999999", ["cluster.nodes", "within int64"]),
    ("cluster.nodes=1000000000", ["cluster.nodes", "at most 1,000,000", "COSIM_MAX_NODES=N"]),
    ("cluster.cores_per_node=10000000", ["cores_per_node", "COSIM_MAX_CORES_PER_NODE=N"]),
    ("seed=99999999999999999999999", ["seed", "within int64"]),
    ("workload.params.seed=-99999999999999999999999", ["workload.params", "within int64"]),
    ("workload.params.x=" + deep_json(PAST_RECURSION), ["--set workload.params.x", "nested at most 64",
                                              "COSIM_MAX_DEPTH=N"]),
])
def test_scenario_values_past_a_limit(capsys, override, fragments):
    one_line(capsys, cosim_main, ["validate", LUBLIN, "--set", override], *fragments)


def test_special_files_are_refused_before_they_are_opened(capsys, tmp_path):
    # /dev/zero never ends; a FIFO waits for a writer forever
    one_line(capsys, cosim_main, ["validate", "/dev/zero"], "/dev/zero", "a character device")
    fifo = tmp_path / "scenario.yaml"
    os.mkfifo(fifo)
    one_line(capsys, cosim_main, ["validate", str(fifo)], "a FIFO")
    one_line(capsys, cosim_main, ["run", LUBLIN, "--set", "workload.kind=swf", "--set",
                                  f"workload.path={fifo}", "--out", str(tmp_path / "r")],
             "a FIFO")
    assert not (tmp_path / "r").exists()


def test_deep_and_large_scenarios(capsys, tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("name: x\nworkload: {kind: lublin}\ndescription: " + deep_json(PAST_RECURSION))
    one_line(capsys, cosim_main, ["validate", str(deep)], "deep.yaml",
             "YAML document nested at most 64 levels")
    deep.write_text("a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 200)))
    one_line(capsys, cosim_main, ["validate", str(deep)], "nested at most 64")
    big = tmp_path / "big.yaml"
    big.write_text("name: x\nworkload: {kind: lublin}\ndescription: '" + "x" * 20_000_000 + "'")
    one_line(capsys, cosim_main, ["validate", str(big)], "big.yaml", "COSIM_MAX_SCENARIO_BYTES=N")


def test_aliases_expanding_exponentially_are_checked_in_linear_time():
    doc = "a0: &a0 [1, 2]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}]\n"
                                       for i in range(1, 40))
    # 3**39 leaves if expanded: this returns at once
    assert isinstance(limits.load_yaml(doc, "x"), dict)


def test_a_gzip_that_inflates_past_the_limit(capsys, tmp_path, monkeypatch):
    bomb = tmp_path / "bomb.swf.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (8 * 2**20), compresslevel=9))
    monkeypatch.setenv("COSIM_MAX_TRACE_BYTES", str(2**20))
    one_line(capsys, cosim_main, ["run", LUBLIN, "--set", "workload.kind=swf", "--set",
                                  f"workload.path={bomb}", "--out", str(tmp_path / "r")],
             "bomb.swf.gz", "more than 1,048,576 bytes inflated", "COSIM_MAX_TRACE_BYTES=N")
    # two gzip members (as `cat a.gz b.gz`) are one trace
    two = tmp_path / "two.gz"
    two.write_bytes(gzip.compress(b"abc\n") + gzip.compress(b"def\n"))
    assert limits.gunzip(two.read_bytes(), "two", limits.TRACE_BYTES) == b"abc\ndef\n"


# The child's own peak (VmHWM, Linux): ru_maxrss of a forked and exec'd child
# starts at the parent's resident size, so inside a test suite grown to 600 MB
# it reported the suite, not the run under test.
_PEAK = """
import sys
from cosim.__main__ import main
code = main(sys.argv[1:])
with open("/proc/self/status") as fh:
    peak = next(line.split()[1] for line in fh if line.startswith("VmHWM:"))
print(code, peak)
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak from /proc (Linux)")
def test_a_3_gib_gzip_is_refused_under_500_mb(tmp_path):
    bomb = tmp_path / "bomb.swf.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as fh:
        block = b"\0" * 2**24
        for _ in range(3 * 64):
            fh.write(block)
    proc = subprocess.run([sys.executable, "-c", _PEAK, "run", LUBLIN, "--set",
                           "workload.kind=swf", "--set", f"workload.path={bomb}", "--out",
                           str(tmp_path / "r")], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    code, peak_kib = proc.stdout.split()
    assert code == "2" and "COSIM_MAX_TRACE_BYTES" in proc.stderr
    assert int(peak_kib) < 500 * 1024


def test_deep_json_in_every_folder_a_user_names(capsys, tmp_path):
    from agents.__main__ import main as agents_main
    from predictors.__main__ import main as predictors_main

    deep = '{"kind": "priority", "x": ' + deep_json(100_000) + "}"
    tuned = tmp_path / "tuned"
    tuned.mkdir()
    (tuned / "policy.json").write_text(deep)
    one_line(capsys, cosim_main, ["run", LUBLIN, "--set", "workload.jobs=20", "--policy",
                                  f"learned:{tuned}", "--out", str(tmp_path / "r")],
             "policy.json", "nested at most 64")
    ckpt = tmp_path / "ckpt"
    (ckpt / "ckpt-000001").mkdir(parents=True)
    (ckpt / "ckpt-000001" / "meta.json").write_text(deep)
    (ckpt / "ckpt-000001" / "state.pt").write_bytes(b"")
    one_line(capsys, agents_main, ["evaluate", LUBLIN, "--checkpoint", str(ckpt)],
             "meta.json", "nested at most 64")
    one_line(capsys, cosim_main, ["run", LUBLIN, "--set", "workload.jobs=20", "--policy",
                                  f"rl:{ckpt}", "--out", str(tmp_path / "r")],
             "meta.json", "nested at most 64")
    models = tmp_path / "models" / "runtime"
    models.mkdir(parents=True)
    (models / "meta.json").write_text(deep)
    data = tmp_path / "data"
    assert predictors_main(["generate", "--jobs", "50", "--seed", "1", "--out", str(data)]) == 0
    capsys.readouterr()
    one_line(capsys, predictors_main, ["evaluate", "--data", str(data), "--models",
                                       str(tmp_path / "models")], "meta.json", "nested at most 64")


def test_json_files_past_the_size_limit(tmp_path, monkeypatch):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"x": "y" * 5000}))
    monkeypatch.setenv("COSIM_MAX_JSON_BYTES", "1000")
    with pytest.raises(limits.LimitError, match="summary.json: expected at most 1,000 .*"
                                                "COSIM_MAX_JSON_BYTES=N"):
        limits.read_json(path)
    with pytest.raises(InputError, match="got a directory"):
        limits.read_json(tmp_path)


@pytest.mark.parametrize("argv,fragments", [
    (["train", LUBLIN, "--seed", "99999999999999999999999"], ["--seed", "within int64"]),
    (["train", LUBLIN, "--checkpoint-every", "0"], ["--checkpoint-every", "above 0"]),
    (["train", LUBLIN, "--out", ""], ["--out", "a path to write"]),
    (["evaluate", LUBLIN, "--checkpoint", "runs/x", "--window", "0"], ["--window", "above 0"]),
])
def test_agents_options(capsys, argv, fragments):
    from agents.__main__ import main as agents_main

    if argv[0] == "evaluate":
        pytest.importorskip("torch")
    one_line(capsys, agents_main, argv, *fragments)


@pytest.mark.parametrize("argv,fragments", [
    (["run", LUBLIN, "--out", ""], ["--out", "a path to write"]),
    (["run", LUBLIN, "--seed", str(2**64)], ["--seed", "within int64"]),
])
def test_cosim_options(capsys, argv, fragments):
    one_line(capsys, cosim_main, argv, *fragments)


@pytest.mark.parametrize("override,fragments", [
    ("prediction_service.simulated_latency=-1", ["simulated_latency", "0 or more seconds"]),
    ("prediction_service.simulated_latency=.nan", ["simulated_latency", "got nan"]),
    ("prediction_service.simulated_latency={median: 1, sigma: 1, x: 2}",
     ["simulated_latency", "{median: s, sigma: x}"]),
    ("prediction_service.backend=http", ["prediction_service", "http://HOST[:PORT]", "None"]),
    ("scheduler.overrun_fraction=.inf", ["overrun_fraction", "a finite number"]),
    ("scheduler.overrun_min_extension=.inf", ["overrun_min_extension", "a finite number"]),
    ("cluster.memory_per_node=.inf", ["memory_per_node", "a finite number"]),
    ("scheduler.policies=[]", ["scheduler.policies", "at least one policy name"]),
    ("workload.offset=-1", ["workload.offset", "0 or more, or 'random'"]),
    ("workload.path=trace.swf", ["workload", "no path for the generator 'lublin'"]),
    ("name=../outside", ["name", "a plain name"]),
])
def test_nonsense_scenario_values_are_refused(capsys, override, fragments):
    one_line(capsys, cosim_main, ["validate", LUBLIN, "--set", override], *fragments)


def test_an_ftp_url_or_a_port_past_65535_is_refused(capsys):
    one_line(capsys, cosim_main, ["validate", LUBLIN, "--set", "prediction_service.backend=http",
                                  "--set", "prediction_service.url=ftp://x:99999"],
             "http://HOST[:PORT]", "ftp://x:99999")
    one_line(capsys, cosim_main, ["validate", LUBLIN, "--set", "prediction_service.backend=http",
                                  "--set", "prediction_service.url=http://x:99999"], "port 1-65535")


def _study(tmp_path, **keys):
    import yaml

    doc = {"scenario": LUBLIN, "policies": ["fcfs+easy"], "seeds": [1], **keys}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.mark.parametrize("keys,fragments", [
    ({"grid": {"workload.jobs": list(range(10, 210)), "cluster.nodes": list(range(10, 210)),
               "metrics.tau": list(range(1, 201))}},
     ["the study's runs", "got 8,000,000", "COSIM_MAX_STUDY_RUNS=N"]),
    ({"bootstrap": 10**9}, ["bootstrap", "COSIM_MAX_BOOTSTRAP=N"]),
    ({"seeds": [2**63]}, ["seeds[0]", "9223372036854775807"]),
    ({"seeds": {"start": 2**63 - 1, "count": 5}}, ["seeds.start"]),
    ({"seeds": {"range": True}}, ["seeds.range", "unknown key"]),
    ({"name": "../../escape"}, ["name", "a plain name"]),
])
def test_studies_past_a_limit_are_refused_even_dry(capsys, tmp_path, keys, fragments):
    one_line(capsys, cosim_main, ["sweep", _study(tmp_path, **keys), "--dry-run", "--out",
                                  str(tmp_path / "out")], *fragments)
    assert not (tmp_path / "out").exists()


def test_the_limits_page_lists_every_limit_with_its_default_and_variable():
    page = (ROOT / "docs" / "reference" / "limits.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| ")]
    for limit in limits.LIMITS.values():
        row = [line for line in rows if f"`{limit.env}`" in line]
        assert len(row) == 1, f"no row (or several) for {limit.env}"
        default = limit.default
        shown = (f"{default // limits.MiB} MiB" if limit.name.endswith("bytes")
                 else f"{default:,}")
        assert f"| {shown}" in row[0], (shown, row[0])


def test_an_swf_header_machine_past_the_limit(capsys, tmp_path):
    trace = tmp_path / "big.swf"
    trace.write_text("; MaxProcs: 1000000000000\n1 0 -1 10 2 -1 -1 2 60 -1 1 7 -1 -1 -1 -1 -1 -1\n")
    one_line(capsys, cosim_main, ["run", str(ROOT / "scenarios" / "swf.yaml"), "--set",
                                  f"workload.path={trace}", "--out", str(tmp_path / "r")],
             "big.swf: the machine it states (header MaxProcs", "COSIM_MAX_NODES=N")
    assert not (tmp_path / "r").exists()


def test_a_checkpoint_latest_never_leaves_its_folder(capsys, tmp_path):
    ckpt = tmp_path / "run"
    (tmp_path / "other" / "ckpt-000001").mkdir(parents=True)
    ckpt.mkdir()
    (ckpt / "LATEST").write_text("../other/ckpt-000001\n")
    one_line(capsys, cosim_main, ["run", LUBLIN, "--set", "workload.jobs=10", "--policy",
                                  f"rl:{ckpt}", "--out", str(tmp_path / "r")],
             "LATEST", "a ckpt-* folder inside", "'../other/ckpt-000001'")


def test_a_checkpoint_with_nan_weights_is_refused(tmp_path):
    torch = pytest.importorskip("torch")
    from agents.checkpoint import load_checkpoint, save_checkpoint

    nan = {"update": 1, "policy": {"w": torch.tensor([1.0, float("nan")])}}
    folder = save_checkpoint(tmp_path / "run", nan, {"step": 1})
    with pytest.raises(InputError, match=r"state.pt: expected finite weights .*got weights that "
                                         r"are NaN or infinite \(policy.w\)"):
        load_checkpoint(folder)


@pytest.mark.parametrize("names,fragments", [
    (["FCFS+EASY"], ["'FCFS+EASY'", "did you mean 'fcfs+easy'?"]),
    ([" fcfs+easy"], ["' fcfs+easy'", "did you mean 'fcfs+easy'?"]),
    (["fcfs+easy", "fcfs+easy"], ["a second time", "each policy once"]),
])
def test_policy_names_are_one_spelling_each_once(capsys, tmp_path, names, fragments):
    argv = ["run", LUBLIN, "--set", "workload.jobs=10", "--out", str(tmp_path / "r")]
    for name in names:
        argv += ["--policy", name]
    one_line(capsys, cosim_main, argv, *fragments)
    assert not (tmp_path / "r").exists()


def test_a_network_description_past_the_parameter_limit_is_refused_before_it_is_built():
    from agents.networks import network_from_spec
    from predictors.remaining import RemainingTimeRegressor, _StaticEncoder

    huge = {"kind": "mlp", "obs_shape": [10], "n_actions": 4, "hidden": [100_000, 100_000]}
    with pytest.raises(limits.LimitError) as err:
        network_from_spec(huge)      # 40 GB of float32 weights
    assert str(err.value) == ("network: expected at most 50,000,000 (the limit on parameters of "
                              "a network a checkpoint or model folder describes; raise it with "
                              "COSIM_MAX_NETWORK_PARAMS=N), got more than 50,000,000 parameters")
    assert sum(p.numel() for p in network_from_spec(
        {"kind": "mlp", "obs_shape": [10], "n_actions": 4, "hidden": [64, 64]}).parameters()) \
        <= limits.check_network([(10, 64), (64, 64), (64, 4)] * 2, "x")
    model = RemainingTimeRegressor(model="gru", num_layers=10**6)
    with pytest.raises(limits.LimitError, match=r"meta.json: the network it describes: expected "
                                                r"at most 50,000,000 \(the limit on parameters"):
        model._check_net_size(_StaticEncoder(5, {}), 8, Path("m/meta.json"))
    RemainingTimeRegressor(model="gru", num_layers=2)._check_net_size(
        _StaticEncoder(5, {}), 8, Path("m/meta.json"))


def test_a_network_description_with_sizes_that_are_not_numbers_is_one_line():
    from agents.networks import network_from_spec

    with pytest.raises(InputError, match=r"^network: expected whole-number sizes, got obs_shape "
                                         r"\[10\], n_actions 4, hidden \['wide'\]$"):
        network_from_spec({"kind": "mlp", "obs_shape": [10], "n_actions": 4, "hidden": ["wide"]})
