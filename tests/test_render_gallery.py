"""A gallery of the demo modules' artifacts, one call: ``render([invocation, ...])``.

The demo modules run for real through the host; every artifact they produce renders as the
primitive it asked for (no fallback warning: pytest turns warnings into errors), and the
gallery covers all thirteen primitives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import murmur_nb as mnb


def _demo_invocations(host: Any) -> list[mnb.Invocation]:
    invs = [
        host.invoke("gallery.thumbs", {"count": 4}),
        host.invoke("gallery.poster", {}),
        host.invoke("gallery.diagram", {}),
        host.invoke("studio.tone", {}),
        host.invoke("studio.clip", {"seconds": 1}),
        host.invoke("docs.report", {}),
    ]
    started = host.invoke("studio.storyboard", {})
    invs.append(started)
    for _ in range(20):
        status = host.invoke("studio.storyboard_status", {"job": started.result["job"]})
        invs.append(status)
        if status.result["state"] == "done":
            break
    staged = host.stage(invs[0].artifacts[0])
    invs.append(host.invoke("critic.review", {"image": staged.ref()}, staged=[staged]))
    return invs


def _leaves(r: mnb.Rendering) -> list[mnb.Rendering]:
    if r.primitive in ("gallery", "invocation"):
        return [leaf for p in r.parts for leaf in _leaves(p)]
    return [r]


@pytest.mark.slow
def test_the_demo_gallery_renders_every_primitive(tmp_path: Path) -> None:
    home = mnb.prepare_demo_home(tmp_path / "demo", hooks=False)
    with home.host(runs_dir=tmp_path / "runs") as host:
        invs = _demo_invocations(host)
        assert all(inv.ok for inv in invs), [(i.capability, i.error) for i in invs if not i.ok]
        gallery = mnb.render(invs)
        again = mnb.render(invs)
    assert gallery.ok, gallery.text
    rendered = {leaf.primitive for leaf in _leaves(gallery)}
    assert rendered == set(mnb.PRIMITIVES)
    asked = {
        mnb.resolve_presentation(a.presentation, a.media_type) for i in invs for a in i.artifacts
    }
    assert asked == rendered  # nothing fell back: every hint was honoured
    assert gallery.text == again.text and gallery.html == again.html
    assert gallery.text.startswith(f"gallery · {len(invs)} items\ninvocation · gallery.thumbs")
    assert str(tmp_path) not in gallery.text
