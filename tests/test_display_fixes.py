"""What an invocation or a rendering shows, whatever the module said (user trials).

* A lone surrogate (``"\\ud800"`` in the envelope's JSON) in a result, a warning, an error
  message or an artifact's file is shown as its escape by every representation; none raises
  when the kernel encodes it, as a notebook showing it did.
* Terminal control sequences a module wrote reach no ``text/plain``: they are escaped.
* Bidirectional overrides and isolates a module wrote (``invoice_\\u202egnp.exe`` shows as
  ``invoice_exe.png``) reach no text and no HTML of the host's: they are escaped too.
* ``repr()`` and ``print()`` of an invocation are its short summary, not the dataclass's
  fields; the result's JSON is indented under ``result:``.
* An artifact too large to embed that sits outside the folder Jupyter serves (a host's run
  folder) is a note saying its size and how to show it, never a player or a link that cannot
  open; ``download_dir`` copies it beside the notebook and links the copy.
* Install advice names both ways murmur-nb is installed: an index or a checkout.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _modules import default_descriptor, install, write_descriptor
from bs4 import BeautifulSoup
from IPython.core.formatters import DisplayFormatter
from IPython.lib.pretty import pretty

import murmur_nb as mnb

FACET_MODULES = [("raw", "raw_text"), ("hostile", "hostile_output")]

#: what the module prints, as the JSON escapes of its envelope: a lone surrogate, then a
#: window title change, a bell and "clear the screen"
ESCAPED = "a\\ud800b \\u001b]0;pwn\\u0007\\u001b[2J"
CONTROL = ("\x1b", "\x07")


@pytest.fixture
def host(facet_home: Path, tmp_path: Path) -> Iterator[mnb.ModuleHost]:
    with mnb.ModuleHost(home=facet_home, artifact_store=tmp_path / "store") as h:
        yield h


def _shown(obj: Any) -> dict[str, str]:
    """Every representation a notebook or a terminal shows of ``obj``, by name."""
    data, _ = DisplayFormatter().format(obj)
    shown = {str(k): v for k, v in data.items() if isinstance(v, str)}
    shown.update({"repr": repr(obj), "str": str(obj), "pretty": pretty(obj)})
    return shown


def _sent(shown: dict[str, str]) -> None:
    """Each representation goes through the kernel as jupyter_client packs a message."""
    for name, text in shown.items():
        packed = json.dumps({name: text}, ensure_ascii=False).encode("utf8", "surrogateescape")
        assert packed, name


def _said(host: mnb.ModuleHost, capability: str, escaped: str, char: str) -> mnb.Invocation:
    """The fixture's invocation saying ``escaped``: its warning or error holds ``char``, as the
    module really sent it (the Invocation keeps a module's words)."""
    inv = host.invoke(capability, {"escaped": escaped})
    said = inv.error.message if inv.error is not None else inv.warnings[-1]
    assert char in said, said
    return inv


@pytest.mark.parametrize("capability", ["raw.say", "raw.fail"])
def test_a_lone_surrogate_from_a_module_shows_as_its_escape_everywhere(
    host: mnb.ModuleHost, capability: str
) -> None:
    inv = _said(host, capability, ESCAPED, "\ud800")
    shown = _shown(inv)
    assert {"text/plain", "text/html", "repr", "str"} <= set(shown)
    _sent(shown)
    for name, text in shown.items():
        assert "\\ud800" in text, name
    _sent(_shown(mnb.render(inv)))


@pytest.mark.parametrize("capability", ["raw.say", "raw.fail"])
def test_terminal_control_sequences_from_a_module_are_escaped_in_text(
    host: mnb.ModuleHost, capability: str
) -> None:
    inv = host.invoke(capability, {"escaped": ESCAPED})
    shown = _shown(inv)
    for name in ("text/plain", "repr", "str", "pretty"):
        assert not any(c in shown[name] for c in CONTROL), (name, shown[name])
        assert "\\x1b]0;pwn\\x07\\x1b[2J" in shown[name], name
    message = "said_no: " if capability == "raw.fail" else "warning: "
    assert message + "a\\ud800b \\x1b]0;pwn" in shown["text/plain"]


#: a right-to-left override (``invoice_exe.png`` on the screen), then an isolate left open,
#: as the JSON escapes of the module's envelope
BIDI = "invoice_\\u202egnp.exe \\u2066tail"
BIDI_CHARS = ("\u202e", "\u2066")


@pytest.mark.parametrize("capability", ["raw.say", "raw.fail"])
def test_bidirectional_overrides_from_a_module_are_escaped_in_text_and_html(
    host: mnb.ModuleHost, capability: str
) -> None:
    inv = _said(host, capability, BIDI, "\u202e")
    shown = {f"Invocation {k}": v for k, v in _shown(inv).items()}
    view = mnb.widgets.InvocationView(inv)
    shown.update({f"InvocationView {k}": v for k, v in _shown(view).items()})
    assert {"Invocation text/html", "InvocationView text/html", "InvocationView text/plain"} < set(
        shown
    )
    for name, text in shown.items():
        assert not any(c in text for c in BIDI_CHARS), (name, text)
        assert "invoice_\\u202egnp.exe \\u2066tail" in text, (name, text)


def _raw_text_as(facet_home: Path, module_id: str) -> tuple[Path, dict[str, Any]]:
    """The ``raw_text`` fixture installed as ``module_id``, and its descriptor (renamed) for
    the test to change and write back (``write_descriptor``)."""
    folder = install(facet_home, module_id, "raw_text")
    described = subprocess.run([str(folder / "module"), "describe"], capture_output=True,
                               check=True).stdout  # fmt: skip
    descriptor: dict[str, Any] = json.loads(described)["result"]
    descriptor["module"] = module_id
    for cap in descriptor["capabilities"]:
        cap["id"] = cap["id"].replace("raw.", f"{module_id}.")
    return folder, descriptor


def test_a_descriptor_s_bidirectional_overrides_are_escaped_in_the_module_browser(
    facet_home: Path, tmp_path: Path
) -> None:
    """A module titles its capability with an override; the browser (rows, form, text, the
    capability list's labels) shows the title in the order it is in."""
    folder, descriptor = _raw_text_as(facet_home, "bidi")
    for cap in descriptor["capabilities"]:
        cap["title"] = "Open invoice_\u202egnp.exe"
    write_descriptor(folder, descriptor)
    with mnb.ModuleHost(home=facet_home, artifact_store=tmp_path / "store") as h:
        _, cap = h.capability("bidi.say")
        assert "\u202e" in cap.title  # the host read it as sent
        browser = mnb.widgets.ModuleBrowser(h)
        shown = _shown(browser)
    listed = browser.capability_picker.options
    shown["the capability list"] = "\n".join(label for label, _ in listed)
    assert "invoice_\\u202egnp.exe" in shown["the capability list"]
    assert {"text/plain", "text/html"} <= set(shown)
    assert "invoice_\\u202egnp.exe" in shown["text/html"]
    for name, text in shown.items():
        assert not any(c in text for c in BIDI_CHARS), (name, text)


def test_a_descriptor_s_words_in_an_error_message_show_as_escapes(
    facet_home: Path, tmp_path: Path
) -> None:
    """The approval error quotes the credentials a module declares: one named with an
    override and a terminal sequence reaches neither the message nor the notebook's
    traceback as such (the traceback's own colour codes stay)."""
    folder, descriptor = _raw_text_as(facet_home, "cred")
    descriptor["permissions"]["credentials"] = ["TOKEN_\u202eyek_ipa \x1b[8mhidden"]
    write_descriptor(folder, descriptor)
    with (
        mnb.ModuleHost(home=facet_home, artifact_store=tmp_path / "store") as h,
        pytest.raises(mnb.ApprovalRequired) as caught,
    ):
        h.invoke("cred.say", {"escaped": "x"})
    assert any("\u202e" in reason for reason in caught.value.reasons)  # as the module said
    traceback = caught.value._render_traceback_()
    for name, text in {"str": str(caught.value), "message": caught.value.message,
                       "traceback": "\n".join(traceback)[len(traceback[0].split(")")[0]):],
                       }.items():  # fmt: skip
        assert "\u202e" not in text and "\x1b[8m" not in text, (name, text)
        assert "TOKEN_\\u202eyek_ipa \\x1b[8mhidden" in text, (name, text)


def test_an_artifact_s_title_and_file_show_safely(host: mnb.ModuleHost) -> None:
    """A module's JSON table holding a lone surrogate, titled with control sequences: the
    rendering is shown and sent, its text carries no control character."""
    content = '[{"name": "x\\ud800y", "n": 1}]'
    claim = {
        "path": "t.json",
        "media_type": "application/json",
        "presentation": "table",
        "title": "table \x1b]0;pwn\x07\x1b[2J",
    }
    inv = host.invoke("hostile.make", {"files": [{"name": "t.json", "content": content}],
                                       "claims": [claim]})  # fmt: skip
    assert inv.ok and len(inv.artifacts) == 1, inv
    assert "\x1b" in inv.artifacts[0].title  # the host kept what the module said
    for obj in (inv, inv.artifacts[0], mnb.render(inv), mnb.render(inv.artifacts[0])):
        shown = _shown(obj)
        _sent(shown)
        for name in ("text/plain", "repr", "str"):
            assert not any(c in shown[name] for c in CONTROL), (name, shown[name])
    rendering = mnb.render(inv.artifacts[0])
    assert rendering.primitive == "table", rendering.text
    assert "x\\ud800y" in rendering.html


def test_repr_and_print_are_the_short_summary(host: mnb.ModuleHost) -> None:
    inv = host.invoke("raw.say", {"escaped": "hello"})
    summary = pretty(inv)
    assert repr(inv) == str(inv) == summary
    assert summary.startswith("Invocation raw.say: ok\n")
    assert len(summary) < 1000, summary
    assert "murmur-nb-runs" not in summary and "Request(" not in summary


def test_the_result_json_is_indented_under_result(host: mnb.ModuleHost) -> None:
    inv = host.invoke("raw.say", {"escaped": "hello"})
    lines = repr(inv).splitlines()
    at = lines.index("  result: {")
    assert lines[at + 1 : at + 3] == ['   "text": "hello"', "  }"]


def test_a_large_medium_outside_the_served_folder_is_a_note_not_a_dead_player(
    demo_home: mnb.DemoHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the notebook's folder; the host's runs are elsewhere
    with demo_home.host() as host:
        tone = host.invoke("studio.tone", {})
        budget = mnb.RenderBudget(embed_bytes=1024)
        for rendering in (mnb.render(tone.artifacts[0], budget=budget),
                          mnb.render(tone, budget=budget)):  # fmt: skip
            soup = BeautifulSoup(rendering.html, "html.parser")
            assert not soup.select("audio, a[href], [src]"), rendering.html
            assert "86.2 KiB is above the 1.0 KiB embed budget" in rendering.text
            assert "RenderBudget(embed_bytes=88236)" in rendering.text
            assert "download_dir" in rendering.text
            assert "embed budget" in soup.get_text() and "download_dir" in soup.get_text()


def test_download_dir_copies_a_large_medium_and_its_player_opens_the_copy(
    demo_home: mnb.DemoHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with demo_home.host() as host:
        art = host.invoke("studio.tone", {}).artifacts[0]
        budget = mnb.RenderBudget(embed_bytes=1024, download_dir="dl")
        rendering = mnb.render(art, budget=budget)
    player = BeautifulSoup(rendering.html, "html.parser").select_one("audio")
    assert player is not None, rendering.html
    src = str(player["src"])
    assert src.startswith("dl/") and src.endswith("-tone.wav"), src
    copy = (tmp_path / src).read_bytes()  # still there: the host is closed, its runs removed
    assert len(copy) == art.bytes and f"sha256:{hashlib.sha256(copy).hexdigest()}" == art.digest


def test_a_large_file_under_the_working_directory_is_still_linked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "media").mkdir()
    (tmp_path / "media" / "a.wav").write_bytes(b"RIFF" + bytes(4000))
    rendering = mnb.render_file("media/a.wav", budget=mnb.RenderBudget(embed_bytes=1024))
    player = BeautifulSoup(rendering.html, "html.parser").select_one("audio")
    assert player is not None and player["src"] == "media/a.wav"
    assert "linked, not embedded" in rendering.text


def test_install_advice_names_the_checkout_install_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "n.md").write_text("# Title\n", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "mistune", None)
    rendering = mnb.render_file(tmp_path / "n.md")
    assert "pip install 'murmur-nb[render]'" in rendering.text
    assert "pip install -e '.[render]'" in rendering.text
    monkeypatch.setitem(sys.modules, "pypdfium2", None)
    (tmp_path / "r.pdf").write_bytes(b"%PDF-1.4\n%%EOF\n")
    with pytest.warns(mnb.PresentationWarning):
        pdf = mnb.render_file(tmp_path / "r.pdf", presentation="slides")
    assert "pip install -e '.[render]'" in pdf.text, pdf.text


def test_a_module_listing_prints_one_short_line_a_module(tmp_path: Path) -> None:
    """``host.modules()`` printed in a notebook or a terminal: one line a module naming its
    state and capabilities, or why it was refused (the dataclass repr ran to 2.6 KB a module,
    with the descriptor's schemas)."""
    home = tmp_path / "home"
    install(home, "plain")
    broken = home / "modules" / "broken"
    broken.mkdir(parents=True)
    (broken / "module").write_text("#!/bin/sh\necho 'not an envelope'\n")
    (broken / "module").chmod(0o755)
    with mnb.ModuleHost(home=home) as listing:
        shown = {m.id: repr(m) for m in listing.modules()}
    assert shown["plain"].startswith("ModuleInfo('plain', ok, capabilities: plain.")
    assert shown["broken"].startswith("ModuleInfo('broken', refused: ")
    assert all(len(line) < 300 and "\n" not in line for line in shown.values()), shown


def test_a_module_s_line_cuts_its_capability_ids_and_its_error_by_the_one_rule(
    tmp_path: Path,
) -> None:
    """``ModuleInfo``'s one line named its first four capability ids whole (four ids of a
    megabyte: a line of four megabytes) and cut its first error with a rule of its own
    (``limit - 3`` and ``...``). Both are cut by the one rule now (``_rules.clipped``)."""
    from murmur_nb._rules import clipped  # private: the one rule the line must cut by

    home = tmp_path / "home"
    folder = install(home, "plain")
    descriptor = default_descriptor(home, "plain")
    first = descriptor["capabilities"][0]
    ids = [f"plain.{letter * 1_000_000}" for letter in "ABCDE"]
    descriptor["capabilities"] = [dict(first, id=i) for i in ids]
    write_descriptor(folder, descriptor)
    folder = install(home, "broken")
    descriptor = default_descriptor(home, "broken")
    descriptor["capabilities"][0]["id"] = "not an id " + "Z" * 1_000_000
    write_descriptor(folder, descriptor)
    policy = mnb.Policy(describe_max_output_bytes=64 << 20)
    with mnb.ModuleHost(home=home, policy=policy) as listing:
        shown = {m.id: repr(m) for m in listing.modules()}
    assert shown["plain"] == (
        f"ModuleInfo('plain', ok, capabilities: {', '.join(map(clipped, ids[:4]))}, +1 more)"
    )
    assert shown["broken"].startswith("ModuleInfo('broken', refused: ")
    assert "…" in shown["broken"] and "..." not in shown["broken"]
    assert all(len(line) < 1_000 for line in shown.values()), [len(x) for x in shown.values()]


def test_a_row_s_error_shows_in_the_batch_view_s_row_list_as_escapes(
    host: mnb.ModuleHost,
) -> None:
    """A row's label in the batch view's list quotes the module's error message: its
    overrides, terminal sequences and lone surrogates show as escapes (the label is an
    ipywidgets option, plain text the browser lays out by the Unicode rules)."""
    batch = host.map("raw.fail", [{"escaped": BIDI + " " + ESCAPED}], progress=False,
                     journal=None)  # fmt: skip
    assert "\u202e" in batch.to_pandas()["error_message"][0]  # the batch keeps the words
    labels = [label for label, _ in mnb.widgets.BatchView(batch).rows.options]
    assert len(labels) == 1, labels
    assert not any(c in labels[0] for c in (*BIDI_CHARS, *CONTROL, "\ud800")), labels
    assert "invoice_\\u202egnp.exe" in labels[0] and "\\x1b]0;pwn" in labels[0], labels


def test_a_descriptor_with_a_lone_surrogate_is_refused_and_breaks_no_listing(
    facet_home: Path, tmp_path: Path
) -> None:
    """A declared credential named with a lone surrogate (the JSON escape ``\\ud800`` in the
    module's describe output): ``host.modules()`` raised ``UnicodeEncodeError`` (digesting
    the descriptor), so no module could be listed, nor the browser show any. The descriptor
    is refused now, saying where and why; the others are listed; the error a notebook is
    sent holds the escape."""
    folder, descriptor = _raw_text_as(facet_home, "lone")
    descriptor["permissions"]["credentials"] = ["TOKEN_\ud800"]
    write_descriptor(folder, descriptor)
    with mnb.ModuleHost(home=facet_home, artifact_store=tmp_path / "store") as h:
        listed = {m.id: m for m in h.modules()}
        assert {"lone", "raw", "hostile"} <= set(listed)
        assert listed["raw"].errors == []
        [problem] = listed["lone"].errors
        assert problem.path == "permissions.credentials[0]", problem
        assert "lone surrogate (\\ud800)" in problem.detail, problem
        with pytest.raises(mnb.InvalidDescriptor) as caught:
            h.invoke("lone.say", {"escaped": "x"})
    shown = {"str": str(caught.value), "traceback": "\n".join(caught.value._render_traceback_())}
    _sent(shown)
    for name, text in shown.items():
        assert "\\ud800" in text and "\ud800" not in text, (name, text)


def test_what_a_module_says_at_length_is_cut_in_its_calls_display(host: mnb.ModuleHost) -> None:
    """An invocation's card and text showed every word a module wrote: one 3 MB warning was
    3 MB of HTML and 3 MB of text at every display of the call, an 8 MB one 16 MB (a
    red-team review). A message is cut at 2,000 characters."""
    inv = host.invoke("raw.say", {"escaped": "W" * 3_000_000})
    assert len(inv.warnings[-1]) == 3_000_000  # the Invocation keeps the module's words
    shown = _shown(inv)
    sizes = {name: len(text) for name, text in shown.items()}
    assert max(sizes.values()) < 16_000, sizes
    assert "W" * 2_000 + "…" in shown["text/html"] and "W" * 2_000 + "…" in shown["repr"]


def test_thousands_of_rejected_artifacts_are_counted_not_listed(host: mnb.ModuleHost) -> None:
    """Each rejected artifact was a row of the card and a line of its text: 40,000 claims of
    a root never supplied (4.6 MB of envelope) made 21 MB of HTML and 8 MB of text at every
    display (a red-team review). The first 12 are listed, the rest counted."""
    claims = [{"path": "x", "root": "nope", "id": f"r{i}", "bytes": 1,
               "digest": "sha256:" + "0" * 64} for i in range(5_000)]  # fmt: skip
    inv = host.invoke("hostile.make", {"claims": claims})
    assert len(inv.rejected_artifacts) == 5_000
    shown = _shown(inv)
    sizes = {name: len(text) for name, text in shown.items()}
    assert max(sizes.values()) < 32_000, sizes
    for name in ("text/html", "repr"):
        assert "r11" in shown[name] and "r12" not in shown[name]
        assert "… and 4988 more rejected" in shown[name]


def test_a_list_of_thousands_of_rejected_artifacts_draws_a_dozen_cards(
    host: mnb.ModuleHost,
) -> None:
    """``render(inv.rejected_artifacts)`` (a gallery) drew an error card for every item:
    20,000 of them were 14 MB of HTML and 1.2 MB of text (and 1.2 s). The first 12 are
    drawn, as an invocation's are, and one line counts the rest, saying how to draw them."""
    claims = [{"path": "x", "root": "nope", "id": f"r{i}", "bytes": 1,
               "digest": "sha256:" + "0" * 64} for i in range(20_000)]  # fmt: skip
    rejected = host.invoke("hostile.make", {"claims": claims}).rejected_artifacts
    assert len(rejected) == 20_000
    shown = _shown(mnb.render(rejected))
    sizes = {name: len(text) for name, text in shown.items()}
    assert max(sizes.values()) < 16_000, sizes
    assert shown["text/plain"].startswith("gallery · 20000 items\nerror · r0 · ")
    line = ("… and 19988 more rejected (the list given to render() keeps them all; render a "
            "slice of it, such as [12:24], to draw others)")  # fmt: skip
    for name in ("text/html", "text/plain"):
        text = shown[name]
        assert "r11" in text and "r12" not in text and line in text, name
    others = mnb.render(rejected[12:24]).text
    assert "error · r12 · " in others and "error · r23 · " in others and "more" not in others


@pytest.mark.parametrize("capability", ["raw.say", "raw.fail"])
def test_what_a_module_says_at_length_is_cut_in_its_invocation_view(
    host: mnb.ModuleHost, capability: str
) -> None:
    """The InvocationView showed a module's warning or error message whole, and its result
    tree every character of the result: one 8 MB warning (also the result, here) was 8 MB of
    the view's HTML and 8 MB of its text (a red-team review). Cut as the card cuts them."""
    from murmur_nb.widgets import InvocationView

    inv = host.invoke(capability, {"escaped": "W" * 8_000_000})
    said = inv.error.message if inv.error is not None else inv.warnings[-1]
    assert len(said) == 8_000_000  # the Invocation keeps the module's words
    shown = _shown(InvocationView(inv))
    sizes = {name: len(text) for name, text in shown.items()}
    assert max(sizes.values()) < 32_000, sizes
    for name in ("text/html", "text/plain"):
        assert "W" * 2_000 + "…" in shown[name], name


def test_thousands_of_rejected_artifacts_are_counted_in_the_rendering_and_the_view(
    host: mnb.ModuleHost,
) -> None:
    """``render(inv)`` drew an error card for each rejected artifact and the InvocationView
    listed each one again: 40,000 claims of a root never supplied made 28.5 MB of HTML and
    2.5 MB (rendering) or 4.3 MB (view) of text, and one 4 MB id 8 MB of every rendering (a
    red-team review). The first 12 are shown, ids cut, the rest counted, naming where they
    all are."""
    from murmur_nb.widgets import InvocationView

    claims = [{"path": "x", "root": "nope", "id": f"r{i}", "bytes": 1,
               "digest": "sha256:" + "0" * 64} for i in range(40_000)]  # fmt: skip
    claims[0]["id"] = "I" * 1_000_000
    inv = host.invoke("hostile.make", {"claims": claims})
    assert len(inv.rejected_artifacts) == 40_000
    assert len(inv.rejected_artifacts[0].id) == 1_000_000  # kept whole
    for view in (mnb.render(inv), InvocationView(inv), InvocationView(inv, render=False)):
        shown = _shown(view)
        sizes = {name: len(text) for name, text in shown.items()}
        assert max(sizes.values()) < 32_000, (type(view).__name__, sizes)
        for name in ("text/html", "text/plain"):
            text = shown[name]
            assert "r11" in text and "r12" not in text, (type(view).__name__, name)
            assert "I" * 200 + "…" in text, (type(view).__name__, name)  # the id, cut
            assert "I" * 2_001 not in text, (type(view).__name__, name)  # the message, cut
            assert "… and 39988 more rejected" in text, (type(view).__name__, name)
            assert "Invocation.rejected_artifacts keeps them all" in text, name


def test_a_list_of_thousands_of_invocations_is_bounded_as_a_whole(host: mnb.ModuleHost) -> None:
    """``render([inv] * 2000)``: each invocation drew its own dozen rejected cards, so the
    list, with no bound of its own, was 17,444,034 characters of HTML (0.6-1.5 s). A list is
    now one rendering: its invocations share the one dozen error cards, it draws the first 100
    invocations and one line counts the others, naming the slice that draws them."""
    claims = [{"path": "x", "root": "nope", "id": f"r{i}", "bytes": 1,
               "digest": "sha256:" + "0" * 64} for i in range(20)]  # fmt: skip
    inv = host.invoke("hostile.make", {"claims": claims})
    assert len(inv.rejected_artifacts) == 20
    shown = _shown(mnb.render([inv] * 2000))
    sizes = {name: len(text) for name, text in shown.items()}
    assert max(sizes.values()) < 64_000, sizes
    text = shown["text/plain"]
    assert text.startswith("gallery · 2000 items\ninvocation · hostile.make")
    assert text.count("invocation · hostile.make") == 100
    assert text.count("error · r") == 12  # one dozen for the whole list
    line = ("… and 1900 more invocations (the list given to render() keeps them all; render "
            "a slice of it, such as [100:200], to draw others)")  # fmt: skip
    for name in ("text/html", "text/plain"):
        assert line in shown[name], name
    alone = mnb.render(inv).text  # one invocation alone draws its dozen, as before
    assert alone.count("error · r") == 12 and "… and 8 more rejected" in alone
    nested = mnb.render([[inv] * 150] * 20)  # lists in a list: the same one bound
    assert nested.text.count("invocation · hostile.make") == 100
    assert len(nested.html) < 64_000
    assert "… and 19 more lists (the list given to render() keeps them all" in nested.text


def test_a_one_line_summary_collapses_whitespace_and_cuts_only_the_head() -> None:
    """What the hook console, the conversation explorer and the hook checker show of a guest's
    or a record's text: one line of at most so many characters, the last ``…`` when cut; a
    text of many megabytes is not split whole (only its head is looked at), and one of mostly
    whitespace still says it was cut."""
    from murmur_nb._rules import one_line  # private: the one rule those three views cut by

    assert one_line("a\n\tb   c", 20) == "a b c"
    assert one_line("word " * 100, 12) == "word word w…"
    huge = "x\n" * (32 * 2**20)
    assert one_line(huge, 10) == "x x x x x…"
    spaced = "a" + " " * 5000 + "b"
    assert one_line(spaced, 10) == "a…"
