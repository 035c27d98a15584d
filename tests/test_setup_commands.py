"""The README's set-up, then its commands, as a new user runs them, in a fresh clone.

One clone of this checkout's HEAD goes to a temporary folder, with a fresh ``$HOME``. There
the README's demo command runs (with ``--headless``, so it ends): it creates ``.venv/``,
installs murmur-nb with its demo extra and runs the tour into an HTML report. Then:

* the author commands of ``docs/checking.md`` (linked from the README), taken from its bash
  block (so this breaks when the page changes), run exactly as written, in one shell, from
  the clone;
* the report is opened in Chromium with every request that is not a local file recorded and
  refused: none may leave the page, and the page must still show the tour;
* the demo is started while a real listener holds its port: with ``--port`` it stops before
  printing any URL and names ``--port``; from the default it takes the next free port, and
  the URL it prints answers with its own token (never another server's).

Downloaded wheels are reused from pip's cache (``$PIP_CACHE_DIR``, else ``~/.cache/pip``):
the first run downloads them, later ones take a few minutes.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _jupyter import chromium

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()
CHECKING = (REPO / "docs" / "checking.md").read_text()


def author_commands() -> str:
    """The bash block under the "Checking a module you wrote" heading of docs/checking.md."""
    assert "(docs/checking.md)" in README, "the README links the page of author commands"
    section = CHECKING.split("## Checking a module you wrote", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```bash\n(.*?)```", section, re.S)
    assert match, "docs/checking.md's author section has no bash block"
    return match.group(1)


def demo_command() -> str:
    """The README's first set-up command (the demo)."""
    section = README.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```bash\n(.*?)```", section, re.S)
    assert match, "the README's set-up has no bash block"
    return match.group(1).strip()


@dataclass
class Clone:
    path: Path
    env: dict[str, str]
    report: Path
    setup_seconds: float
    home: Path
    stdout: str
    stderr: str


def _env(home: Path) -> dict[str, str]:
    """This machine's environment (its pip settings included) for a new user: a fresh
    ``$HOME``, and nothing pointing at this checkout or its environment."""
    drop = ("MURMUR_NB", "PYTEST", "PYTHON", "VIRTUAL_ENV", "JUPYTER")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["HOME"] = str(home)
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    # the hook build's caches (componentize-py, wasm) survive between runs, as a user's would
    env["MURMUR_NB_CACHE"] = os.environ.get(
        "MURMUR_NB_CACHE", str(Path.home() / ".cache" / "murmur-nb")
    )
    return env


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Clone:
    """A fresh clone after the README's demo command, run headless."""
    root = tmp_path_factory.mktemp("fresh")
    path = root / "murmur-nb"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(path)], check=True, timeout=120)
    home = root / "user"
    home.mkdir()
    env = _env(home)
    command = demo_command()
    assert command == "bash scripts/demo", command
    t0 = time.perf_counter()
    done = subprocess.run(
        ["bash", "-c", f"{command} --headless"], cwd=path, env=env, capture_output=True,
        text=True, timeout=1500, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - t0
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    demo_home = home / ".murmur-nb-demo"
    report = demo_home / "report" / "01-tour.html"
    assert f"report: {report}" in done.stdout, done.stdout[-2000:]
    return Clone(path, env, report, seconds, demo_home, done.stdout, done.stderr)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_headless_demo_prepares_the_home_and_writes_the_tour_report(clone: Clone) -> None:
    home, out = clone.home, clone.stdout
    assert f"preparing the demo home in {home}" in out
    assert "6 modules: critic, docs, gallery, oracle, studio, transcribe (needs setup)" in out
    assert (home / "facet-studio" / "modules" / "gallery" / "module").is_file()
    assert (home / "murmur" / "hooks" / "summarize.wasm").read_bytes()[:4] == b"\0asm"
    page = clone.report.read_text()
    assert "Traceback (most recent call last)" not in page
    # Widgets are saved as their static HTML, so the report shows them offline too.
    assert page.count('class="murmur-static"') >= 5
    assert "application/vnd.jupyter.widget-state+json" not in page
    assert "Needs setup" in page and "cost unknown" in page
    for primitive in ("image", "table", "markdown", "json"):
        assert f'data-primitive="{primitive}"' in page, primitive
    assert "not-granted" in page and "320 messages" in page
    # issue 40: no kernel warning on the way, and the "Next:" links reach the tutorials
    assert "without encryption" not in out + clone.stderr, clone.stderr[-2000:]
    links = re.findall(r'href="([^"#]+\.ipynb)"', page)
    assert len(links) >= 4 and all(
        (clone.report.parent / link).resolve() == home / "notebooks" / Path(link).name
        and (home / "notebooks" / Path(link).name).is_file() for link in links
    ), links


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_docs_author_commands_work_after_the_readme_set_up(clone: Clone) -> None:
    commands = author_commands()
    assert "murmur-nb check" in commands and "pytest --modproto" in commands
    done = subprocess.run(
        ["bash", "-e", "-c", commands], cwd=clone.path, env=clone.env, capture_output=True,
        text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    # the report wraps to the terminal's width: inside the path, or right after it
    passed = re.search(r"^PASS critic \(.*?\):\s+0 fail", done.stdout, re.M | re.S)
    assert passed, done.stdout[-3000:]
    summary = done.stdout.strip().splitlines()[-1]
    assert re.search(r"=+ \d+ passed", summary) and "failed" not in summary, summary
    # the programs are the clone's own environment's, found through the activated PATH
    which = subprocess.run(
        ["bash", "-c", "source .venv/bin/activate && command -v murmur-nb pytest"],
        cwd=clone.path, env=clone.env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert which.stdout.split() == [
        str(clone.path / ".venv" / "bin" / "murmur-nb"),
        str(clone.path / ".venv" / "bin" / "pytest"),
    ]
    print(f"set-up {clone.setup_seconds:.0f} s; author commands: {summary}")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_headless_report_loads_nothing_from_the_network(clone: Clone) -> None:
    page_text = clone.report.read_text()
    assert "cdnjs" not in page_text and "require.min.js" not in page_text
    left: list[str] = []
    failed: list[str] = []
    with chromium(clone.path.parent / "profile") as ctx:

        def refuse(route: object) -> None:
            url = route.request.url  # type: ignore[attr-defined]
            if url.startswith(("file:", "data:", "blob:", "about:")):
                route.continue_()  # type: ignore[attr-defined]
                return
            left.append(url)
            route.abort()  # type: ignore[attr-defined]

        ctx.route("**/*", refuse)
        page = ctx.new_page()
        page.on("requestfailed", lambda request: failed.append(request.url))
        page.goto(clone.report.as_uri(), wait_until="load")
        page.wait_for_timeout(2000)  # anything a script starts late
        assert page.locator("h1").first.is_visible()
        assert page.locator(".murmur-static").count() >= 5
        assert page.locator(".murmur-artifact img").count() >= 1
    assert left == [], f"the report requested {left}"
    assert [u for u in failed if not u.startswith("data:")] == [], failed


def _listener() -> tuple[socket.socket, int]:
    """A real TCP listener on a free loopback port, as another server would hold it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock, sock.getsockname()[1]


@contextlib.contextmanager
def _demo(clone: Clone, *args: str, env: dict[str, str] | None = None) -> Iterator[
    subprocess.Popen[str]
]:
    proc = subprocess.Popen(
        ["bash", "scripts/demo", "--no-browser", *args], cwd=clone.path, env=env or clone.env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _until_url(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Read the demo's output until it prints the tour's URL (or ends): the URL, and what
    was printed before it."""
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + 240
    for line in proc.stdout:
        seen.append(line)
        if "the tour: http" in line:
            return line.split("the tour: ", 1)[1].split()[0], "".join(seen)
        assert time.monotonic() < deadline, "".join(seen)
    pytest.fail(f"no URL printed:\n{''.join(seen)}\n{proc.stderr.read() if proc.stderr else ''}")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_busy_port_given_with_port_stops_before_any_url(clone: Clone) -> None:
    other, port = _listener()
    with other, _demo(clone, "--port", str(port)) as proc:
        out, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, (out, err)
    assert "http://" not in out and "http://" not in err
    assert f"port {port} is busy" in err and "--port N" in err


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_busy_default_port_gives_the_next_free_one_and_only_our_url(
    clone: Clone, tmp_path: Path
) -> None:
    other, port = _listener()
    env = {**clone.env, "MURMUR_NB_DEMO_PORT": str(port)}
    chosen = tmp_path / "chosen home"  # --home too: the demo home goes where the user says
    with other, _demo(clone, "--home", str(chosen), env=env) as proc:
        url, before = _until_url(proc)
        assert f"preparing the demo home in {chosen}" in before
        assert (chosen / "murmur" / "hooks" / "summarize.wasm").read_bytes()[:4] == b"\0asm"
        assert f"port {port} is busy, so JupyterLab uses" in before
        got = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/lab/tree/01-tour\.ipynb\?token=(\w+)", url)
        assert got, url
        assert int(got.group(1)) != port
        status = f"http://127.0.0.1:{got.group(1)}/api/status?token={got.group(2)}"
        with urllib.request.urlopen(status, timeout=10) as response:
            assert response.status == 200  # this demo's own JupyterLab, with its token
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200 and b"JupyterLab" in response.read()


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_the_test_command_explains_itself_and_does_nothing_else(
    tmp_path: Path, flag: str
) -> None:
    """Issue 18: ``bash scripts/test --help`` went through the apt checks, pip, ruff and mypy
    and then gave ``--help`` to pytest. In a copy of the script without ``.venv``, on a PATH
    without apt-get, sudo or python3, it prints its usage and makes nothing."""
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    (checkout / "scripts" / "test").write_bytes((REPO / "scripts" / "test").read_bytes())
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("dirname", "sed", "cat"):
        found = shutil.which(name)
        assert found is not None, name
        (tools / name).symlink_to(found)
    done = subprocess.run(
        ["/bin/bash", "scripts/test", "tests/test_readme.py", flag], cwd=checkout,
        env={"PATH": str(tools), "HOME": str(tmp_path)}, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stderr == "", done.stderr
    out = " ".join(done.stdout.split())
    assert "bash scripts/test [PYTEST ARGUMENTS...]" in out, out
    assert "ruff" in out and "mypy" in out and "go to pytest" in out, out
    assert "-n 0" in out and "-h, --help" in out and "pipefail" not in out, out
    assert sorted(p.name for p in checkout.iterdir()) == ["scripts"]  # no .venv, nothing
