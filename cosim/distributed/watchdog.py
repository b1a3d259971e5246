"""Ends a private local Ray when the process that started it dies (even by kill -9).

Ray stops its GCS server and raylet with the driver, but agents the raylet
started (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) notice the
raylet's death and then hang on their way out, and stay forever.
:func:`cosim.distributed.ray_session` therefore starts this script beside a
private Ray::

    python -I watchdog.py TOKEN DRIVER_PID   (stdin: the read end of a pipe)

The driver holds the only write end of the pipe, so reading stdin returns
end-of-file exactly when the driver is gone, however it died, or when it
closes the pipe after stopping Ray. The watchdog then kills every process of
that Ray, again until none is left, and exits. A process belongs to it if

- its environment holds ``COSIM_RAY_WATCH=TOKEN``: the driver sets it while
  Ray starts, and Ray's processes inherit it. Python processes of Ray that
  set their title (``ray::...``) overwrite their environment, hence also:
- it has a file open under the Ray session folder: every Ray process keeps
  its logs there. The driver writes the folder to the pipe (one line) once
  Ray is up; until then the watchdog reads it, every quarter second, from
  the command line of Ray's GCS server or raylet (marked, and started first),
  as the driver may die before ``ray.init`` returns.

The driver itself is never killed (it closes the pipe after stopping Ray,
with its own logs there still open).

Standard library only, and run by path with ``-I``: it starts fast and does
not depend on which ``cosim`` is importable. Linux only (it reads
``/proc/PID/environ``); elsewhere the driver does not start it.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time

#: The environment variable that marks the processes of one private Ray.
MARK = "COSIM_RAY_WATCH"
#: How long the watchdog keeps sweeping for processes still being started.
SWEEP_S = 10.0


#: Ray's servers are started with their session folder on the command line.
_SESSION_ARG = re.compile(rb"--session[-_]dir=([^\0]+)")


def session_folder(token: str) -> str | None:
    """The session folder named on the command line of a process marked with ``token``."""
    entry = f"{MARK}={token}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or not _marked(name, entry):
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                found = _SESSION_ARG.search(f.read())
        except OSError:
            continue
        if found:
            return os.path.realpath(found.group(1).decode(errors="replace"))
    return None


def _marked(pid: str, entry: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return entry in f.read().split(b"\0")
    except OSError:              # gone already, or not ours to read
        return False


def _uses(pid: str, folders: list[str]) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if any(target.startswith(folder) for folder in folders):
            return True
    return False


def members(token: str, folders: list[str], spare: set[int]) -> list[int]:
    """Pids of the processes of one Ray: marked with ``token`` or with a file open
    under one of ``folders``; never those in ``spare`` (nor this one)."""
    entry = f"{MARK}={token}".encode()
    prefixes = [folder.rstrip("/") + "/" for folder in folders if folder]
    spare = spare | {os.getpid()}
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in spare:
            continue
        if _marked(name, entry) or (prefixes and _uses(name, prefixes)):
            found.append(int(name))
    return found


def sweep(token: str, folders: list[str], spare: set[int], within_s: float = SWEEP_S) -> int:
    """SIGKILL every process of the Ray, again until none is left or ``within_s`` passed.

    Returns the number of kill signals sent.
    """
    sent = 0
    deadline = time.monotonic() + within_s
    while True:
        pids = members(token, folders, spare)
        if not pids or time.monotonic() > deadline:
            return sent
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                sent += 1
            except OSError:
                pass
        time.sleep(0.1)


def main(argv: list[str]) -> int:
    """Read session folders from stdin until end-of-file, then sweep that Ray."""
    if len(argv) != 2 or not argv[0] or not argv[1].isdigit():
        print("usage: watchdog.py TOKEN DRIVER_PID  (stdin: a pipe the driver holds open)",
              file=sys.stderr)
        return 2
    token = argv[0]
    # A Ctrl-C meant for the driver must not stop the clean-up it triggers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    folders: list[str] = []
    closed = threading.Event()

    def read() -> None:
        for line in sys.stdin.buffer:
            folders.append(line.decode(errors="replace").strip())
        closed.set()

    threading.Thread(target=read, daemon=True).start()
    while not closed.wait(0.25):
        if not folders and (found := session_folder(token)):
            folders.append(found)
    sweep(token, folders, spare={int(argv[1])})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
