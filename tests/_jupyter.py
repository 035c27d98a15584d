"""Jupyter servers and a real Chromium for the browser and Voilà tests.

Servers are started as real subprocesses on loopback, each in its own session so the whole
tree (server and kernels) is stopped by its process-group id afterwards. Chromium is Debian's
``/usr/bin/chromium`` driven by Playwright through ``executable_path``: nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import nbformat
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


def quiet_lab_settings(env: dict[str, str]) -> None:
    """Every cell stays in the DOM (no virtual scrolling), and no news toast covers the page."""
    tracker = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True, exist_ok=True)
    (tracker / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    news = tracker.parent / "apputils-extension"
    news.mkdir(exist_ok=True)
    (news / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')


def lab_root(tmp_path: Path, home: Path) -> tuple[dict[str, str], Path]:
    """A fresh Jupyter environment over ``home`` with :func:`quiet_lab_settings`, and the empty
    folder ``tmp_path / "root"`` for JupyterLab to serve."""
    env = jupyter_env(tmp_path, home)
    quiet_lab_settings(env)
    root = tmp_path / "root"
    root.mkdir()
    return env, root


def write_notebook(path: Path, cells: Iterable[str | Any]) -> None:
    """Write a notebook for the python3 kernel: a source string becomes a code cell, an
    ``nbformat`` cell is kept as it is."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) if isinstance(c, str) else c for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(nb, path)


def lab_command(port: int, token: str, root: Path) -> list[str]:
    """``jupyter lab`` on loopback with a token, serving ``root``."""
    cmd = [
        str(BIN / "jupyter"), "lab", "--no-browser",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]  # fmt: skip
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd


@contextlib.contextmanager
def lab_in_chromium(
    root: Path, env: dict[str, str], tmp_path: Path
) -> Iterator[tuple[Callable[[str], str], Any]]:
    """JupyterLab serving ``root`` (token on loopback) and a Chromium context.

    Yields the address of a notebook under ``root`` (``url("01-tour.ipynb")``) and the
    browser context; both are stopped afterwards.
    """
    token = secrets.token_hex(16)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    ready = f"{base}/api/status?token={token}"
    with (
        serving(lab_command(port, token, root), env, ready, tmp_path / "lab.log"),
        chromium(tmp_path / "profile") as ctx,
    ):
        yield (lambda notebook: f"{base}/lab/tree/{notebook}?token={token}"), ctx


#: Inside an async page function with ``panel``: wait for the kernel, then for the widget
#: manager to have restored its state (its control comm opened and closed, if it opens). In
#: JupyterLab 4.6 (comms over per-target kernel subshells) widget comms opened while that
#: comm's subshell is torn down can be left addressing a deleted subshell; the kernel then
#: drops every message they send ("Unknown subshell_id"), and clicks in them never arrive.
WIDGETS_READY_JS = """
    await panel.context.ready;
    await panel.sessionContext.ready;
    const kernel = panel.sessionContext.session.kernel;
    await kernel.info;
    const control = () => [...kernel._comms.values()].some(
        c => c._target === 'jupyter.widget.control');
    let seen = false;  // it opens soon after the kernel connects; none within 2 s: done
    for (let i = 0; i < 200; i++) {
        if (control()) seen = true;
        else if (seen || i >= 40) break;
        await new Promise(r => setTimeout(r, 50));
    }
"""

#: Run every cell of the open notebook with a fresh kernel state.
RUN_ALL_JS = """async () => {
    const app = window.jupyterapp;
    const panel = app.shell.currentWidget;""" + WIDGETS_READY_JS + """
    await app.commands.execute('notebook:clear-all-cell-outputs');
    await app.commands.execute('notebook:run-all-cells');
}"""

def run_in_lab(
    ctx: Any, address: str, *, run_js: str = RUN_ALL_JS, timeout_ms: int = 120_000
) -> tuple[Any, list[str]]:
    """Open the notebook at ``address`` in a new page of ``ctx`` and start ``run_js`` on it
    (:data:`RUN_ALL_JS`: run every cell). Returns the page and the list its uncaught page
    errors are appended to (a test ends by asserting it is empty)."""
    page = ctx.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.goto(address, timeout=timeout_ms)
    page.wait_for_function("() => window.jupyterapp !== undefined", timeout=timeout_ms)
    page.wait_for_selector(".jp-NotebookPanel .jp-CodeCell", timeout=timeout_ms)
    page.evaluate(run_js)
    return page, problems


def wait_for_dark(page: Any, timeout_ms: int = 120_000) -> None:
    """Wait until the page shows JupyterLab's dark theme."""
    page.wait_for_function(
        "() => document.body.dataset.jpThemeLight === 'false'", timeout=timeout_ms
    )


def switch_to_dark(page: Any, timeout_ms: int = 120_000) -> None:
    """Switch JupyterLab to its dark theme and wait until the page shows it."""
    page.evaluate(
        "async () => window.jupyterapp.commands.execute("
        "'apputils:change-theme', {theme: 'JupyterLab Dark'})"
    )
    wait_for_dark(page, timeout_ms)


class LabPage:
    """A notebook page in JupyterLab: its cells' outputs, found and measured.

    ``theme`` names the theme the page shows (``"light"`` until :meth:`dark`); screenshots
    and assertion messages carry it.
    """

    def __init__(self, page: Any, *, wait_ms: int = 120_000) -> None:
        self.page = page
        self.wait_ms = wait_ms
        self.theme = "light"

    def out(self, index: int, holding: str | None = None) -> Any:
        """Code cell ``index``'s first output, or its first output holding ``holding``."""
        where = ".jp-OutputArea-output" + (f":has({holding})" if holding else "")
        return self.page.locator(".jp-Notebook .jp-CodeCell").nth(index).locator(where).first

    def see(self, index: int, selector: str) -> Any:
        """Wait until ``selector`` is visible in cell ``index``'s output, and return it."""
        found = self.out(index).locator(selector).first
        found.wait_for(state="visible", timeout=self.wait_ms)
        return found

    def fit_output(self, width: int, index: int) -> None:
        """Resize the window so cell ``index``'s output area is ``width`` px wide."""
        area = self.out(index)
        for _ in range(3):
            now = area.evaluate("el => el.getBoundingClientRect().width")
            view = self.page.viewport_size
            if abs(now - width) < 1:
                return
            self.page.set_viewport_size({"width": int(view["width"] + width - now),
                                         "height": view["height"]})  # fmt: skip
            self.page.wait_for_timeout(300)
        assert abs(area.evaluate("el => el.getBoundingClientRect().width") - width) < 1

    def dark(self) -> None:
        """Switch JupyterLab to its dark theme (:func:`switch_to_dark`)."""
        switch_to_dark(self.page, self.wait_ms)
        self.theme = "dark"

    def shot(self, index: int, name: str) -> None:
        """Screenshot cell ``index``'s output as ``<name>-<theme>.png`` in the artifacts."""
        self.out(index).scroll_into_view_if_needed()
        self.out(index).screenshot(path=str(artifacts_dir() / f"{name}-{self.theme}.png"))


#: Contrast ratio (WCAG 2) of each element matching a selector against the background it is
#: drawn on: the colour is blended over the first opaque-enough background of its ancestors.
#: SVG text is measured by its fill, against the shapes painted under its centre (a bar, a
#: shaded lane) over the page, or against its own halo when it is drawn with one.
CONTRAST_JS = """sel => {
    const parse = c => (c.match(/[\\d.]+/g) || []).map(Number);
    const lum = ([r, g, b]) => {
        const f = v => {
            v /= 255;
            return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
        };
        return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
    };
    const over = ([r, g, b, a = 1], under) =>
        [r * a + under[0] * (1 - a), g * a + under[1] * (1 - a), b * a + under[2] * (1 - a)];
    const background = el => {
        const layers = [];
        for (let n = el; n; n = n.parentElement) {
            const [r, g, b, a = 1] = parse(getComputedStyle(n).backgroundColor);
            if (a > 0) { layers.push([r, g, b, a]); if (a >= 1) break; }
        }
        let out = [255, 255, 255];
        for (const layer of layers.reverse()) out = over(layer, out);
        return out;
    };
    const shapesBehind = el => {
        const svg = el.ownerSVGElement;
        el.scrollIntoView({block: 'center'});
        const box = el.getBoundingClientRect();
        const [x, y] = [box.left + box.width / 2, box.top + box.height / 2];
        const stack = document.elementsFromPoint(x, y);
        const layers = [];
        for (const n of stack) {
            if (n === svg) break;
            if (!svg.contains(n) || !['rect', 'path', 'circle', 'ellipse'].includes(n.localName)) {
                continue;
            }
            const st = getComputedStyle(n);
            if (!st.fill.startsWith('rgb')) continue;
            const [r, g, b, a = 1] = parse(st.fill);
            const alpha = a * Number(st.fillOpacity) * Number(st.opacity);
            layers.push([r, g, b, alpha]);
            if (alpha >= 1) break;
        }
        let out = background(svg);
        for (const layer of layers.reverse()) out = over(layer, out);
        return out;
    };
    const colours = el => {
        const st = getComputedStyle(el);
        if (!(el instanceof SVGElement)) {
            const bg = background(el);
            return [over(parse(st.color), bg), bg];
        }
        let bg = shapesBehind(el);
        const halo = st.stroke.startsWith('rgb') && st.paintOrder.startsWith('stroke')
            && parseFloat(st.strokeWidth) >= 2;
        if (halo) bg = over(parse(st.stroke), bg);
        return [over(parse(st.fill), bg), bg];
    };
    return [...document.querySelectorAll(sel)].filter(el => el.offsetParent !== null
        && el.textContent.trim()).map(el => {
        const [fg, bg] = colours(el);
        const [l1, l2] = [lum(fg), lum(bg)].sort((x, y) => y - x);
        return [el.textContent.trim().slice(0, 40), (l1 + 0.05) / (l2 + 0.05)];
    });
}"""
