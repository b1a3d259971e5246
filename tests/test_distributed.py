"""A private local Ray goes with the process that started it (issue 21, item 4).

Ray alone leaves ``ray::DashboardAgent`` and ``ray::RuntimeEnvAgent`` running
for ever when the driver is killed with SIGKILL (they see the raylet die, then
hang on their way out). These tests kill a real ``python -m cosim sweep`` and
check that no process of its Ray is left, and test the watchdog on its own
with plain processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from cosim.distributed import watchdog as ray_watchdog

ROOT = Path(__file__).resolve().parents[1]
WATCHDOG = ROOT / "cosim" / "distributed" / "watchdog.py"

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"),
                                reason="the watchdog reads /proc (Linux)")


def _start_time(pid: int) -> str | None:
    """The start time of a live process (None: gone or a zombie); tells reused pids apart."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


class _Seen:
    """Every process of one sweep seen so far: the environment ``entry`` it was started
    with (lost by Ray's processes that set their title) or a file open under its Ray
    session folder (found by the driver's pid once Ray made it)."""

    def __init__(self, entry: str, driver: int) -> None:
        self.entry, self.driver = entry.encode(), driver
        self.procs: dict[int, tuple[str, str]] = {}     # pid -> (start time, command)

    def _folder(self) -> str | None:
        base = Path(os.environ.get("RAY_TMPDIR", "/tmp")) / "ray"
        found = sorted(base.glob(f"session_*_{self.driver}"))
        return os.path.realpath(found[-1]) + "/" if found else None

    def look(self) -> dict[int, tuple[str, str]]:
        """Look again; return the processes of the sweep alive now."""
        folder = self._folder()
        now = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            try:
                ours = self.entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                if not ours and folder:
                    ours = any(os.readlink(f"/proc/{pid}/fd/{fd}").startswith(folder)
                               for fd in os.listdir(f"/proc/{pid}/fd"))
            except OSError:
                continue
            started = _start_time(pid)
            if ours and started:
                now[pid] = (started, _cmdline(pid))
        self.procs.update(now)
        return now

    def alive(self) -> dict[int, str]:
        """Those seen at any time that still run (same pid, same start time), and any new."""
        now = self.look()
        left = {pid: cmd for pid, (t, cmd) in self.procs.items() if _start_time(pid) == t}
        return left | {pid: cmd for pid, (_, cmd) in now.items()}


def _sleeper(env_extra: dict[str, str], holding: Path | None = None) -> subprocess.Popen:
    """A process that sleeps, with ``env_extra`` and (if given) a file open at ``holding``."""
    code = "import time, sys; f = open(sys.argv[1], 'w') if sys.argv[1:] else None; time.sleep(60)"
    return subprocess.Popen([sys.executable, "-c", code, *([str(holding)] if holding else [])],
                            env={**os.environ, **env_extra})


def _watchdog(token: str, driver: int, folders: list[Path] = ()) -> tuple[subprocess.Popen, int]:
    """The watchdog as the driver starts it; returns it and the pipe's write end."""
    read, write = os.pipe()
    dog = subprocess.Popen([sys.executable, "-I", str(WATCHDOG), token, str(driver)], stdin=read)
    os.close(read)
    for folder in folders:
        os.write(write, f"{folder}\n".encode())
    return dog, write


def _end(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_the_watchdog_kills_the_processes_of_its_ray_when_the_pipe_closes_and_only_those(
        tmp_path):
    token, other = uuid.uuid4().hex, uuid.uuid4().hex
    session, elsewhere = tmp_path / "session", tmp_path / "session-other"
    session.mkdir()
    elsewhere.mkdir()
    marked = _sleeper({ray_watchdog.MARK: token})
    # A Ray process that set its title lost the mark; its log file is open.
    logging_ = _sleeper({}, holding=session / "logs.out")
    driver = _sleeper({ray_watchdog.MARK: token}, holding=session / "driver.log")
    theirs = [_sleeper({ray_watchdog.MARK: other}), _sleeper({}, holding=elsewhere / "x.log")]
    time.sleep(0.5)                          # the files are open by now
    dog, write = _watchdog(token, driver.pid, [session])
    try:
        time.sleep(0.3)
        assert dog.poll() is None and marked.poll() is None   # it waits on the pipe
        os.close(write)                      # what the driver's death does
        assert dog.wait(timeout=10) == 0
        assert marked.wait(timeout=5) == -signal.SIGKILL
        assert logging_.wait(timeout=5) == -signal.SIGKILL
        assert driver.poll() is None         # the pid it was given is spared
        assert all(p.poll() is None for p in theirs)   # another Ray: not touched
    finally:
        _end(marked, logging_, driver, *theirs)


def test_before_the_driver_names_the_session_folder_the_watchdog_reads_it_from_ray_servers(
        tmp_path):
    # The driver died inside ray.init: no folder came down the pipe. The GCS
    # server (marked, the folder on its command line) tells the watchdog.
    token = uuid.uuid4().hex
    session = tmp_path / "session_x"
    session.mkdir()
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                               f"--session-dir={session}"],
                              env={**os.environ, ray_watchdog.MARK: token})
    agent = _sleeper({}, holding=session / "agent.log")
    time.sleep(0.5)
    dog, write = _watchdog(token, os.getpid())
    try:
        time.sleep(1.0)                      # a few of its looks at the command lines
        server.kill()                        # the servers die with the driver
        server.wait()
        os.close(write)
        assert dog.wait(timeout=10) == 0
        assert agent.wait(timeout=5) == -signal.SIGKILL
    finally:
        _end(server, agent, dog)


def test_the_watchdog_ignores_ctrl_c_and_still_sweeps():
    token = uuid.uuid4().hex
    victim = _sleeper({ray_watchdog.MARK: token})
    dog, write = _watchdog(token, os.getpid())
    try:
        time.sleep(0.5)                      # its SIGINT handler is set by now
        dog.send_signal(signal.SIGINT)
        time.sleep(0.2)
        assert dog.poll() is None
        os.close(write)
        assert dog.wait(timeout=10) == 0
        assert victim.wait(timeout=5) == -signal.SIGKILL
    finally:
        _end(victim, dog)


@pytest.mark.parametrize("args", [[], ["tok"], ["tok", "notapid"]])
def test_the_watchdog_with_wrong_arguments_is_a_usage_line(args):
    proc = subprocess.run([sys.executable, "-I", str(WATCHDOG), *args], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: watchdog.py TOKEN DRIVER_PID")


def _agents_up(running: dict[int, tuple[str, str]]) -> bool:
    # Both have set their title: they are past start-up (killed earlier, they go).
    cmds = " ".join(cmd for _, cmd in running.values())
    return "ray::DashboardAgent" in cmds and "ray::RuntimeEnvAgent" in cmds


def _a_run_in_a_worker(running: dict[int, tuple[str, str]]) -> bool:
    # The engine names its Ray task after the function: ray::_execute_run.
    return any("execute_run" in cmd for _, cmd in running.values())


@pytest.mark.parametrize("ready", [
    # Ray's agents are up (those are what Ray alone leaves behind): about 12 s.
    _agents_up,
    # A run is in a worker as well: the whole sweep as a user kills it.
    pytest.param(_a_run_in_a_worker, marks=pytest.mark.slow),
], ids=["agents-up", "runs-in-workers"])
def test_a_killed_sweep_leaves_no_process_of_its_ray(tmp_path, ready):
    pytest.importorskip("ray")
    # Runs long enough to be killed in the middle (two 30,000-job runs).
    study = tmp_path / "study.yaml"
    study.write_text(f"name: killed\nscenario: {ROOT / 'scenarios' / 'lublin256.yaml'}\n"
                     "policies: [fcfs+easy]\nseeds: [1, 2]\nset: {workload.jobs: 30000}\n"
                     "plots: false\n")
    entry = f"COSIM_TEST_KILLED_SWEEP={uuid.uuid4().hex}"
    key, value = entry.split("=")
    env = {**os.environ, key: value, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "cosim", "sweep", str(study), "--out",
                             str(tmp_path / "out"), "--quiet"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen = _Seen(entry, proc.pid)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if ready(seen.look()):
                break
            time.sleep(0.1)
        assert proc.poll() is None, "the sweep ended before it could be killed"
        cmds = [cmd for _, cmd in seen.procs.values()]
        assert any("raylet" in cmd for cmd in cmds) and any("gcs_server" in c for c in cmds)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 15
        while (left := seen.alive()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, f"left running after kill -9 of the sweep: {left}"
    finally:
        for pid in seen.alive():             # never leave them to other tests
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
