"""The tour served as an app by Voilà on loopback.

Voilà executes the notebook in a fresh kernel when the page is requested and returns the page
with every output embedded as JSON for its front end to draw; widgets are views of models that
live in that kernel. The test fetches the page over HTTP and checks those outputs (every widget
view, every rendered artifact, no error or stderr output), then opens the same URL in Debian's
Chromium to see the widgets drawn from the kernel's models.
"""

from __future__ import annotations

import json
import re
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from _jupyter import BIN, artifacts_dir, chromium, free_port, jupyter_env, serving, tour_copy

import murmur_nb as mnb

WIDGETS = [
    "ModuleBrowser", "InvocationView", "CapabilityForm", "ConversationExplorer", "HookConsole"
]  # fmt: skip
VOILA_OUTPUT = "application/vnd.voila.cell-output+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class _Outputs(HTMLParser):
    """The cell outputs of a Voilà page: each is a ``vnd.voila.cell-output+json`` script."""

    def __init__(self) -> None:
        super().__init__()
        self.outputs: list[dict[str, Any]] = []
        self._inside = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._inside = tag == "script" and dict(attrs).get("type") == VOILA_OUTPUT

    def handle_endtag(self, tag: str) -> None:
        self._inside = False

    def handle_data(self, data: str) -> None:
        if self._inside and data.strip():
            self.outputs.append(json.loads(data))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_voila_serves_the_tour_with_its_widgets_and_no_errors(tmp_path: Path) -> None:
    demo = mnb.prepare_demo_home(tmp_path / "demo")
    tour = tour_copy(tmp_path / "root")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [
        str(BIN / "voila"), str(tour), "--no-browser", "--Voila.ip=127.0.0.1",
        f"--port={port}", "--show_tracebacks=True", "--Voila.token=",
    ]  # fmt: skip
    env = jupyter_env(tmp_path, demo.path)
    # Voilà answers anything but its page with 403 in single-notebook mode: up is up.
    with serving(cmd, env, f"{base}/voila/static/", tmp_path / "voila.log", any_status=True):
        with urllib.request.urlopen(f"{base}/", timeout=600) as response:
            assert response.status == 200
            page = response.read().decode()
        parsed = _Outputs()
        parsed.feed(page)

        assert "Traceback (most recent call last)" not in page
        assert not re.search(r"There was an error when executing cell", page)
        outputs = parsed.outputs
        assert len(outputs) >= 10, page[-3000:]
        failed = [o for o in outputs if o.get("output_type") == "error"]
        assert failed == [] and [o for o in outputs if o.get("name") == "stderr"] == []
        # Each widget of the tour is a view of a live model, with its own text form beside it.
        views = [o["data"] for o in outputs if WIDGET_VIEW in o.get("data", {})]
        assert [v["text/plain"].split(maxsplit=1)[0].rstrip(":") for v in views] == WIDGETS
        assert all(v[WIDGET_VIEW]["model_id"] for v in views)
        assert "transcribe 0.3.0 [Needs setup]" in views[0]["text/plain"]
        assert "approval needed:" in views[2]["text/plain"]
        assert "not-granted" in views[4]["text/plain"]
        # The rendered artifacts: the poster, then the report's table, markdown and JSON.
        # (a widget's own text/html is its static fallback: the widget itself is checked above)
        plain_outputs = [o for o in outputs if "data" in o and WIDGET_VIEW not in o["data"]]
        rendered = " ".join(o["data"].get("text/html", "") for o in plain_outputs)
        primitives = re.findall(r'class="murmur-artifact" data-primitive="(\w+)"', rendered)
        assert primitives == ["image", "table", "markdown", "json"]
        assert rendered.count('src="data:image/png;base64,') >= 1
        plain = " ".join(o["data"].get("text/plain", "") for o in outputs if "data" in o)
        assert "declares no numeric cost" in plain  # approval reasons
        assert "docs.report" in plain  # the audit table

        with chromium(tmp_path / "profile") as ctx:
            browser = ctx.new_page()
            problems: list[str] = []
            browser.on("pageerror", lambda exc: problems.append(str(exc)))
            browser.goto(f"{base}/", timeout=600_000)
            shown = "attached"
            wait = 120_000
            browser.wait_for_selector(".murmur-badge:has-text('Needs setup')", state=shown,
                                      timeout=wait)  # fmt: skip
            grid = ".jupyter-widgets .murmur-artifact[data-primitive='image_grid'] img"
            browser.wait_for_function(
                """sel => [...document.querySelectorAll(sel)]
                    .filter(i => i.complete && i.naturalWidth > 0).length === 6""",
                arg=grid,
                timeout=wait,
            )
            browser.wait_for_selector(".jupyter-widgets:has-text('call_0113')", state=shown,
                                      timeout=wait)  # fmt: skip
            browser.wait_for_selector(".jupyter-widgets:has-text('not-granted')", state=shown,
                                      timeout=wait)  # fmt: skip
            browser.wait_for_selector(".jupyter-widgets button:has-text('Approve')",
                                      state="visible", timeout=wait)  # fmt: skip
            assert browser.locator(".jupyter-widgets.widget-vbox").count() >= len(WIDGETS)
            assert browser.locator("text=Error displaying widget").count() == 0
            browser.screenshot(path=str(artifacts_dir() / "voila-tour.png"), full_page=True)
        assert problems == [], problems
