"""Jupyter servers and a real Chromium for the browser and Voilà tests.

Servers are started as real subprocesses on loopback, each in its own session so the whole
tree (server and kernels) is stopped by its process-group id afterwards. Chromium is Debian's
``/usr/bin/chromium`` driven by Playwright through ``executable_path``: nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
BIN = Path(sys.executable).parent


def artifacts_dir() -> Path:
    """Where screenshots go: ``$MURMUR_NB_TEST_ARTIFACTS``, else ``test-artifacts/``."""
    folder = Path(os.environ.get("MURMUR_NB_TEST_ARTIFACTS", REPO / "test-artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def jupyter_env(tmp_path: Path, demo_home: Path) -> dict[str, str]:
    """An environment whose Jupyter config, data and runtime folders are all fresh."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PYTEST"))}
    for name in ("config", "runtime", "data"):
        (tmp_path / "jupyter" / name).mkdir(parents=True, exist_ok=True)
    env.update(
        PATH=f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}",
        JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter" / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter" / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "jupyter" / "lab-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "jupyter" / "lab-workspaces"),
        MURMUR_NB_DEMO_HOME=str(demo_home),
    )
    return env


def tour_copy(folder: Path) -> Path:
    """A copy of the tour to serve, so a run in the browser never rewrites the repository's."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "01-tour.ipynb"
    shutil.copyfile(REPO / "notebooks" / "01-tour.ipynb", target)
    return target


@contextlib.contextmanager
def serving(
    cmd: list[str], env: dict[str, str], ready_url: str, log: Path, *, any_status: bool = False
) -> Iterator[None]:
    """Run a server until ``ready_url`` answers 200 (any HTTP status with ``any_status``).

    The whole process group (server and kernels) is stopped afterwards.
    """
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, env=env, cwd=str(log.parent), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{cmd[0]} exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(ready_url, timeout=5) as response:
                    if response.status == 200:
                        break
            except urllib.error.HTTPError:
                if any_status:
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{ready_url} did not answer within 120 s:\n{log.read_text()[-4000:]}")
            time.sleep(0.5)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[Any]:
    """A headless Debian Chromium with a fresh profile, as a Playwright browser context."""
    if not CHROMIUM.is_file():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium package "
            "(apt-get install -y chromium); scripts/test does this"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 1000},
        )
        try:
            yield context
        finally:
            context.close()
