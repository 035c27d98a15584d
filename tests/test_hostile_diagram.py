"""Issue 22, point 14: ``dot`` (and ``mmdc``) parse a module's text, so they run confined.

Two attackers. The real Graphviz ``dot`` reads any image file a DOT attribute names
(``image``, ``shapefile``, ``imagepath``) and writes its size into the SVG: run in the
kernel's account it measures a secret PNG of the test's, run confined it cannot see it. And a
``dot`` whose parser a module's text has taken over (here: a real program on ``PATH``, run
exactly as ``dot`` would be, doing what such an exploit would) tries to read a secret, write a
file beside it and connect to a listener on loopback: unconfined it does all three (the
control), confined none.
"""

from __future__ import annotations

import base64
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from test_render_kit import artifact

import murmur_nb as mnb
from murmur_nb._sandbox import sandbox_report  # private: a report that allows no mechanism

FACET_MODULES = [("hostile", "hostile_output")]

pytestmark = pytest.mark.skipif(
    subprocess.run(["which", "dot"], capture_output=True, check=False).returncode != 0,
    reason="needs the Graphviz 'dot' binary",
)

SECRET_TEXT = "TOP SECRET kernel-side file"

#: What an exploited ``dot`` would do: its orders come in the DOT text it parses.
TAKEN_OVER = r'''
import re, socket, sys
text = sys.stdin.read()
order = dict(re.findall(r"// (read|write|port): (\S+)", text))
found = []
try:
    found.append("read " + open(order["read"]).read())
except OSError as exc:
    found.append(f"read refused {exc.__class__.__name__}")
try:
    with open(order["write"], "w") as fh:
        fh.write("written by the diagram renderer")
    found.append("wrote")
except OSError as exc:
    found.append(f"write refused {exc.__class__.__name__}")
try:
    with socket.create_connection(("127.0.0.1", int(order["port"])), timeout=2) as conn:
        conn.sendall(b"hello from the renderer")
    found.append("connected")
except OSError as exc:
    found.append(f"connect refused {exc.__class__.__name__}")
print('<svg xmlns="http://www.w3.org/2000/svg"><text>' + " | ".join(found) + "</text></svg>")
'''


@pytest.fixture
def host(facet_home: Path, tmp_path: Path) -> Iterator[mnb.ModuleHost]:
    with mnb.ModuleHost(home=facet_home, artifact_store=tmp_path / "store") as h:
        yield h


@pytest.fixture
def secrets(tmp_path: Path) -> Path:
    """A folder of the kernel's: a readable text secret and a 777x333 PNG."""
    from PIL import Image

    folder = tmp_path / "host-only"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET_TEXT)
    Image.new("RGB", (777, 333), (9, 9, 9)).save(folder / "secret.png")
    return folder


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        server.settimeout(0.5)
        yield server


def _accepted(server: socket.socket) -> bytes | None:
    try:
        conn, _ = server.accept()
    except TimeoutError:
        return None
    with conn:
        conn.settimeout(2)
        return conn.recv(100)


def _diagram(host: mnb.ModuleHost, dot_text: str) -> mnb.Rendering:
    """A module writes ``dot_text`` as a DOT diagram artifact; the kernel renders it."""
    files = [{"name": "graph.dot", "content": dot_text}]
    claim = {"path": "graph.dot", "media_type": "text/vnd.graphviz", "presentation": "diagram"}
    inv = host.invoke("hostile.make", {"files": files, "claims": [claim]})
    (part,) = mnb.render(inv).parts
    return part


def _drawn_svg(part: mnb.Rendering) -> str:
    img = BeautifulSoup(part.html, "html.parser").select_one("img")
    assert img is not None, part.text
    prefix = "data:image/svg+xml;base64,"
    src = str(img["src"])
    assert src.startswith(prefix)
    return base64.b64decode(src[len(prefix):]).decode("utf-8")


def test_dot_attributes_naming_files_cannot_reach_the_kernels_files(
    host: mnb.ModuleHost, secrets: Path
) -> None:
    png = secrets / "secret.png"
    dot_text = (
        f'digraph {{ graph [imagepath="{secrets}"];\n'
        f'  by_path [image="{png}", label=""];\n'
        '  by_imagepath [image="secret.png", label=""];\n'
        f'  by_shapefile [shapefile="{png}"];\n'
        '  etc [image="/etc/shadow"];\n'
        "  by_path -> by_imagepath -> by_shapefile -> etc }\n"
    )
    before = sorted(p.name for p in secrets.iterdir())
    # the control: in the kernel's account, dot opens the secret and measures it
    unconfined = subprocess.run(
        ["dot", "-Tsvg"], input=dot_text.encode(), capture_output=True, check=True
    ).stdout.decode()
    assert 'width="777px" height="333px"' in unconfined
    assert f'xlink:href="{png}"' in unconfined

    part = _diagram(host, dot_text)

    assert part.primitive == "diagram" and "Graphviz drawn as SVG" in part.text, part.text
    svg = _drawn_svg(part)
    assert "<title>by_path</title>" in svg  # drawn: the same graph, every node there
    assert "777" not in svg and "333px" not in svg  # never opened: nothing measured
    assert "<image" not in svg
    assert sorted(p.name for p in secrets.iterdir()) == before


def _taken_over_dot(tmp_path: Path) -> Path:
    folder = tmp_path / "taken-over-bin"
    folder.mkdir()
    exe = folder / "dot"
    exe.write_text(f"#!{sys.executable} -S\n{TAKEN_OVER}")
    exe.chmod(0o755)
    return folder


def test_a_taken_over_dot_reads_writes_and_connects_nothing(
    host: mnb.ModuleHost,
    secrets: Path,
    listener: socket.socket,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bin_dir = _taken_over_dot(tmp_path)
    planted = secrets / "planted.txt"
    port = listener.getsockname()[1]
    orders = (
        f"// read: {secrets / 'secret.txt'}\n// write: {planted}\n// port: {port}\n"
        "digraph { a -> b }\n"
    )
    # the control: run as the kernel's own process, it does all three
    unconfined = subprocess.run(
        [str(bin_dir / "dot"), "-Tsvg"], input=orders.encode(), capture_output=True,
        check=True, env={},
    ).stdout.decode()
    assert SECRET_TEXT in unconfined and "wrote" in unconfined and "connected" in unconfined
    assert planted.read_text() == "written by the diagram renderer"
    assert _accepted(listener) == b"hello from the renderer"
    planted.unlink()

    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    part = _diagram(host, orders)

    svg = _drawn_svg(part)  # it ran (the renderer on PATH is the taken-over one)...
    assert "read refused" in svg and "write refused" in svg and "connect refused" in svg
    assert SECRET_TEXT not in part.html and SECRET_TEXT not in part.text  # ...confined
    assert not planted.exists()
    assert _accepted(listener) is None


def test_without_the_sandbox_the_renderer_never_runs(
    tmp_path: Path, secrets: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Internal (``draw_source`` with a given sandbox report): a machine whose sandbox lacks
    a guarantee cannot be made from a test, so the report of one that allows no mechanism
    stands in; the renderer on ``PATH`` would plant a file if it ran at all."""
    from murmur_nb._render.primitives.diagram import draw_source  # private: draws under that report

    bin_dir = _taken_over_dot(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    planted = secrets / "planted.txt"
    orders = f"// read: {secrets / 'secret.txt'}\n// write: {planted}\n// port: 9\n"

    none_allowed = sandbox_report("required", [])
    assert not none_allowed.complete
    svg, reason = draw_source("text/vnd.graphviz", orders, sandbox=none_allowed)

    assert svg is None and reason is not None
    assert "never drawn unconfined" in reason and "missing: filesystem" in reason
    assert not planted.exists()


def test_a_huge_drawing_is_cut_at_the_embed_budget(tmp_path: Path) -> None:
    edges = "".join(f"n{i} -> n{i + 1};" for i in range(300))
    (tmp_path / "big.dot").write_text(f"digraph {{ {edges} }}")
    small = mnb.render_file(tmp_path / "big.dot", presentation="diagram",
                            budget=mnb.RenderBudget(embed_bytes=20_000))
    assert "drew more than 19.5 KiB of SVG (RenderBudget.embed_bytes)" in small.text
    assert "<img" not in small.html and "n299" in small.html  # the source, shown instead
    roomy = mnb.render_file(tmp_path / "big.dot", presentation="diagram")
    assert "Graphviz drawn as SVG" in roomy.text


def test_a_gallery_of_slow_diagrams_stops_drawing_at_the_renderings_time(tmp_path: Path) -> None:
    """Three diagrams of 13 KB that each keep ``dot`` busy past its 30 s (a complete graph
    of 40 nodes, ``mclimit=1000``), rendered as one gallery: each ran to 30 s, 90 s in all
    (a red-team review). A rendering's drawing now shares ``RenderBudget.draw_s`` (30 s;
    1.5 s here): the first diagram is stopped at what is left, the others are not drawn, and
    each card shows its source and says why."""
    body = "".join(f"n{i}->n{j};" for i in range(40) for j in range(40) if i != j)
    arts = []
    for k in range(3):
        (tmp_path / f"g{k}.dot").write_text(f"digraph{{mclimit=1000;/*{k}*/{body}}}")
        arts.append(artifact(tmp_path, f"g{k}.dot", "text/vnd.graphviz", "diagram"))
    started = time.monotonic()
    r = mnb.render(arts, budget=mnb.RenderBudget(draw_s=1.5))
    elapsed = time.monotonic() - started
    assert elapsed < 10, elapsed  # 90 s before
    assert "<img" not in r.html
    assert len(re.findall(r"did not finish within 1\.\d+ s", r.text)) == 1, r.text
    assert r.text.count("this rendering spent its 1.5 s of drawing (RenderBudget.draw_s") == 2
    assert "or with a larger RenderBudget(draw_s=...), to draw it" in r.text
