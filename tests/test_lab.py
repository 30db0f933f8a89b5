"""JupyterLab opens the study: a headless server serves the notebooks as they are on disk, and the Lab page.

What `make lab` starts, started here without a browser, on a free local port with a random token, rooted
at notebooks/, and always stopped (its whole process group killed if it does not stop when asked).
"""

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("jupyterlab", reason="jupyterlab is not installed (it comes with `make env`)")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
NOTEBOOK = "00_summary.ipynb"
HANG_GUARD_S = 600.0  # a guard against a hung server or request only: a loaded machine is slow, not hung
STOP_S = 10.0  # how long it may take to stop when asked, before its process group is killed


@dataclass(frozen=True)
class Lab:
    url: str
    token: str

    def get(self, path: str) -> tuple[int, bytes]:
        request = urllib.request.Request(self.url + path, headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=HANG_GUARD_S) as response:
            return response.status, response.read()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log_tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"


def wait_until_up(lab: Lab, server: subprocess.Popen, log: Path) -> None:
    """Poll /api/status until it answers; fail with the server's log if it exits (or hangs: HANG_GUARD_S)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while True:
        if server.poll() is not None:
            pytest.fail(f"JupyterLab exited with {server.returncode} before answering:\n{log_tail(log)}")
        try:
            status, body = lab.get("/api/status")
            if status == 200 and "started" in json.loads(body):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"JupyterLab did not answer /api/status within {HANG_GUARD_S:.0f} s (hung):\n{log_tail(log)}")
        time.sleep(0.5)


def stop(server: subprocess.Popen) -> None:
    """Ask the server to stop; kill its process group if it has not within STOP_S."""
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=STOP_S)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    port, token = free_port(), secrets.token_hex(24)
    # Jupyter's config, data and runtime folders in tmp_path: no user settings read, nothing written elsewhere.
    env = os.environ | {f"JUPYTER_{kind}_DIR": str(tmp_path / kind.lower()) for kind in ("CONFIG", "DATA", "RUNTIME")}
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.port_retries=0",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.token={token}", f"--ServerApp.root_dir={NOTEBOOKS}",
        "--ServerApp.open_browser=False",
    ]  # fmt: skip
    if os.geteuid() == 0:  # containers and CI runners often run as root, which Jupyter refuses unless told
        command.append("--allow-root")
    log = tmp_path / "jupyterlab.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
        )
    try:
        lab = Lab(f"http://127.0.0.1:{port}", token)
        wait_until_up(lab, server, log)
        yield lab
    finally:
        stop(server)


def source(cell: dict) -> str:
    text = cell["source"]
    return "".join(text) if isinstance(text, list) else text


@pytest.mark.slow
def test_jupyterlab_serves_the_notebooks_as_they_are_on_disk(lab: Lab):
    on_disk = json.loads((NOTEBOOKS / NOTEBOOK).read_text())

    status, body = lab.get(f"/api/contents/{NOTEBOOK}?content=1")
    assert status == 200
    model = json.loads(body)
    assert model["type"] == "notebook" and model["format"] == "json"
    served = model["content"]["cells"]
    assert len(served) == len(on_disk["cells"])
    assert [c["cell_type"] for c in served] == [c["cell_type"] for c in on_disk["cells"]]
    assert source(served[0]) == source(on_disk["cells"][0])

    status, page = lab.get("/lab")
    assert status == 200
    assert b"JupyterLab" in page
