"""Finding 11b: a module's Markdown must not plant a beacon. ``![](https://...)`` shown as an
image makes every reader's browser fetch it, telling that server when the output is viewed.

The attack is real: the remote images point at a listener on loopback that counts requests,
and the rendered HTML is opened in headless Chromium, served by that listener as a notebook
server would serve it. Without the opt-in the listener hears nothing but the page; with
``RenderBudget(remote_images=True)`` it hears every image (so it really would have heard
them).
"""

from __future__ import annotations

import base64
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _jupyter import chromium
from bs4 import BeautifulSoup
from test_render_kit import artifact

import murmur_nb as mnb

#: a 1x1 GIF, what a tracking pixel is (and a local image, in the page itself)
DOT = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"
PIXEL = base64.b64decode(DOT.split(",", 1)[1])


class _Listener(http.server.ThreadingHTTPServer):
    """Serves ``page`` at ``/page.html`` and a pixel at any other path, which it records."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Pixel)
        self.page = b""
        self.heard: list[str] = []


class _Pixel(http.server.BaseHTTPRequestHandler):
    server: _Listener

    def do_GET(self) -> None:
        if self.path == "/page.html":
            body, kind = self.server.page, "text/html; charset=utf-8"
        else:
            self.server.heard.append(self.path)
            body, kind = PIXEL, "image/gif"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[_Listener]:
    server = _Listener()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _beacons(base: str) -> str:
    """Markdown whose images reach ``base`` in every spelling a browser follows."""
    host = base.removeprefix("http://")
    return (
        "# Weekly report\n\n"
        f"![]({base}/plain.gif?reader=1)\n\n"
        f"![logo](//{host}/no-scheme.gif)\n\n"
        f"![](<{base}/angle.gif>)\n\n"
        f"![](&#104;ttp://{host}/entity.gif)\n\n"
        "![by reference][r]\n\n"
        f"A local one stays: ![dot]({DOT})\n\n"
        f"[r]: HTTP://{host}/reference.gif\n"
    )


def _heard_when_shown(listener: _Listener, browser: Any, html: str) -> list[str]:
    """What the listener hears while ``browser`` shows ``html`` as a page of its own."""
    head = '<link rel="icon" href="data:,">'  # no favicon request: the listener hears only images
    listener.page = f"<!doctype html><html><head>{head}</head><body>{html}</body></html>".encode()
    listener.heard.clear()
    page = browser.new_page()
    page.goto(f"http://127.0.0.1:{listener.server_address[1]}/page.html", wait_until="load")
    page.wait_for_load_state("networkidle")
    page.close()
    return sorted(listener.heard)


def test_remote_markdown_images_are_links_not_beacons(tmp_path: Path, listener: _Listener) -> None:
    base = f"http://127.0.0.1:{listener.server_address[1]}"
    root = tmp_path / "out"
    root.mkdir()
    (root / "report.md").write_text(_beacons(base))
    (root / "deck.md").write_text(_beacons(base) + "\n---\n\n" + _beacons(base))
    inv = mnb.render(
        [
            artifact(root, "report.md", "text/markdown"),
            artifact(root, "deck.md", "text/markdown", "slides"),
        ]
    )
    soup = BeautifulSoup(inv.html, "html.parser")
    assert [str(img["src"]) for img in soup.select("img")] == [DOT] * 3  # only the local ones
    linked = [str(a["href"]) for a in soup.select("a") if "127.0.0.1" in str(a["href"])]
    assert len(linked) == 15, linked
    assert "5 remote images shown as links" in inv.text
    assert "10 remote images shown as links" in inv.text
    assert "RenderBudget(remote_images=True)" in inv.text
    opted_in = mnb.render(
        artifact(root, "report.md", "text/markdown"),
        budget=mnb.RenderBudget(remote_images=True),
    )
    with chromium(tmp_path / "profile") as browser:
        heard = _heard_when_shown(listener, browser, inv.html)
        heard_opted_in = _heard_when_shown(listener, browser, opted_in.html)
    assert heard == []
    assert heard_opted_in == [
        "/angle.gif",
        "/entity.gif",
        "/no-scheme.gif",
        "/plain.gif?reader=1",
        "/reference.gif",
    ]
