"""``scripts/demo``, the README's main command, run for real.

The interactive form ends in JupyterLab (its page and widgets are proved by
``test_browser.py``); the headless form runs end to end from a fresh clone in
``test_setup_commands.py`` (set-up, a chosen home, the tour's report). Here: its arguments,
and its report step on a small notebook.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "scripts" / "demo"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MURMUR_NB", "PYTEST"))}
    env["HOME"] = str(tmp_path / "user")  # the default demo home must not be the one used
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    env["MURMUR_NB_CACHE"] = os.environ.get(
        "MURMUR_NB_CACHE", str(Path.home() / ".cache" / "murmur-nb")
    )
    return env


def test_unknown_arguments_are_refused_with_the_usage(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(DEMO), "--frobnicate"], env=_env(tmp_path), capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "unknown argument '--frobnicate'" in done.stderr
    assert "--headless" in done.stderr and "--home DIR" in done.stderr
    helped = subprocess.run(
        ["bash", str(DEMO), "--help"], env=_env(tmp_path), capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert helped.returncode == 0 and "JupyterLab at the tour" in helped.stdout


def test_the_headless_report_step_is_quiet_and_its_next_links_resolve(tmp_path: Path) -> None:
    """Issue 40: ``scripts/demo --headless`` printed ipykernel's "running over TCP without
    encryption" warning, and the report's "Next:" links named notebooks that were not beside
    it. Its report step (``scripts/demo_report.py``) runs a notebook holding the tour's own
    "Next:" cell with the kernel on IPC sockets, and points each link at the working copy."""
    tour = nbformat.read(REPO / "notebooks" / "01-tour.ipynb", as_version=4)
    (following,) = [c for c in tour.cells if c.source.startswith("Next:")]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import murmur_nb as mnb\nprint(mnb.__version__)"),
                nbformat.v4.new_markdown_cell(following.source)]  # fmt: skip
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    source = tmp_path / "checkout" / "01-tour.ipynb"
    source.parent.mkdir()
    nbformat.write(nb, source)
    work = tmp_path / "home" / "notebooks"  # where scripts/demo copies the tutorials
    work.mkdir(parents=True)
    for name in re.findall(r"\(([^)]+\.ipynb)\)", following.source):
        shutil.copyfile(REPO / "notebooks" / name, work / name)
    report = tmp_path / "home" / "report" / "01-tour.html"
    report.parent.mkdir()
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "demo_report.py"), str(source), str(report),
         str(work)], capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "without encryption" not in done.stdout + done.stderr, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    page = report.read_text(encoding="utf-8")
    links = re.findall(r'href="([^"#]+\.ipynb)"', page)
    assert len(links) == 6, links  # 02 to 07
    for link in links:
        assert (report.parent / link).resolve().is_file(), link
        assert (report.parent / link).resolve().parent == work


def _copy(tmp_path: Path) -> Path:
    """A checkout holding only the script and ``pyproject.toml``: what it makes is seen."""
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy2(DEMO, checkout / "scripts" / "demo")
    shutil.copy2(REPO / "pyproject.toml", checkout / "pyproject.toml")
    return checkout


def _stub(path: Path, status: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\nexit {status}\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(
    ("args", "port_env", "said"),
    [
        (["--port", "abc"], None, "--port takes a port number from 1 to 65535, not 'abc'"),
        (["--port=abc"], None, "--port takes a port number from 1 to 65535, not 'abc'"),
        (["--port", "99999"], None, "--port takes a port number from 1 to 65535, not '99999'"),
        (["--port", "0"], None, "--port takes a port number from 1 to 65535, not '0'"),
        ([], "abc", "$MURMUR_NB_DEMO_PORT takes a port number from 1 to 65535, not 'abc'"),
        ([], "70000", "$MURMUR_NB_DEMO_PORT takes a port number from 1 to 65535, not '70000'"),
        (["--home"], None, "--home needs a value"),
        (["--home="], None, "--home needs a value"),
        (["--report"], None, "--report needs a value"),
        (["--port"], None, "--port needs a value"),
        (["--no-browser", "--home"], None, "--home needs a value"),
    ],
)
def test_bad_option_values_are_refused_with_the_usage_before_any_work(
    tmp_path: Path, args: list[str], port_env: str | None, said: str
) -> None:
    """Issue 12: ``--port abc`` gave a Python traceback, "port abc is busy" and "abc:
    unbound variable"; ``--port 99999`` an OverflowError and a suggestion of port 100000;
    ``--home`` alone "$2: unbound variable" (each after the set-up had run). The
    interpreter here is one that fails the version check, so a script that goes on past
    its arguments stops there instead of installing anything."""
    checkout = _copy(tmp_path)
    env = _env(tmp_path)
    env["PYTHON"] = str(_stub(tmp_path / "bin" / "python3", 1))
    if port_env is not None:
        env["MURMUR_NB_DEMO_PORT"] = port_env
    done = subprocess.run(
        ["bash", "scripts/demo", *args], cwd=checkout, env=env, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"scripts/demo: {said}" in done.stderr, done.stderr
    assert "bash scripts/demo [--home DIR] [--port N]" in done.stderr  # the usage
    assert "Traceback" not in done.stderr and "unbound variable" not in done.stderr
    assert done.stdout == "" and not (checkout / ".venv").exists()


def test_a_port_at_the_top_of_the_range_is_taken(tmp_path: Path) -> None:
    """The highest port is a port: it passes the check (and the script goes on, here to the
    interpreter check, which the stub fails)."""
    env = _env(tmp_path)
    env["PYTHON"] = str(_stub(tmp_path / "bin" / "python3", 1))
    done = subprocess.run(
        ["bash", "scripts/demo", "--port", "65535"], cwd=_copy(tmp_path), env=env,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and "needs Python 3.11" in done.stderr, done.stderr


def test_without_bubblewrap_it_says_what_confines_the_modules(tmp_path: Path) -> None:
    """Issue 11: without bwrap it said modules "will be refused (sandbox_unavailable)", but
    they run under Landlock, seccomp and the subreaper (docs/sandbox.md, "Where it runs"),
    and the demo's best-effort policy runs them anyway. A PATH without bwrap, apt-get or sudo;
    a ``.venv`` already installed whose interpreter stops the script at the demo home."""
    checkout = _copy(tmp_path)
    _stub(checkout / ".venv" / "bin" / "python", 3)
    digest = hashlib.sha256((checkout / "pyproject.toml").read_bytes()).hexdigest()
    (checkout / ".venv" / ".murmur-nb-demo-installed").write_text(digest + "\n")
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("dirname", "id", "sha256sum", "cut", "cat", "mkdir", "sed"):
        found = shutil.which(name)
        assert found is not None, name
        (tools / name).symlink_to(found)
    env = _env(tmp_path)
    env["PATH"] = str(tools)
    env["PYTHON"] = sys.executable
    done = subprocess.run(
        ["/bin/bash", "scripts/demo", "--home", str(tmp_path / "demo")], cwd=checkout, env=env,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 3, (done.stdout, done.stderr)  # stopped where it was meant to
    said = " ".join(done.stderr.split())
    assert "bubblewrap is missing" in said, said
    assert "will be refused" not in said and "sandbox_unavailable" not in said, said
    assert "Landlock, seccomp and a subreaper helper" in said, said
    assert "best-effort" in said and "docs/sandbox.md" in said, said
    assert "sudo apt-get install -y bubblewrap" in said, said
