"""What a hostile module says, printed by the ``murmur-nb`` command: its words cannot drive
the terminal that shows them (a title, a cleared screen, a forged PASS, a one-character CSI
U+009B, a right-to-left override), whichever command prints them, and the JSON the command
prints still reads back as exactly what the module said.

The module is ``tests/modules/hostile_words.py``, run for real by the real command; the hook
is ``tests/test_hostile_hook_check.py``'s, which answers ``err`` with the same kind of words.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _modules import install
from test_hostile_hook_check import capsule, no_control

import murmur_nb as mnb

SAID = "\x1b]0;owned\x07\x1b[2J\x1b[32mPASS\x1b[0m \u009b31m caf\u00e9 \u202eevil\x7f"
#: What no byte of the output may hold: ESC, BEL, the C1 CSI, the override, DEL (as UTF-8).
ACTING = [b"\x1b", b"\x07", "\u009b".encode(), "\u202e".encode(), b"\x7f"]


@pytest.fixture
def hostile_home(tmp_path: Path) -> Path:
    home = tmp_path / "facet"
    install(home, "evil", "hostile_words")
    return home


def murmur_nb(*argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "murmur_nb", *argv], capture_output=True,
                          timeout=300, check=False)  # fmt: skip


def acting(printed: bytes) -> list[bytes]:
    return [b for b in ACTING if b in printed]


def test_cli_json_keeps_module_words_off_the_terminal(hostile_home: Path) -> None:
    """``list``, ``describe`` and ``invoke`` print the module's name, titles, summaries,
    result, warnings and error as JSON: fails before: U+009B, U+202E and DEL were printed raw
    (JSON escapes only ``\\x00``-``\\x1f``); now each is a ``\\u`` escape, and the JSON reads
    back as the very words (``café`` kept as it is)."""
    home = ["--home", str(hostile_home)]
    runs = {
        "list": murmur_nb(*home, "list"),
        "describe": murmur_nb(*home, "describe", "evil"),
        "ok": murmur_nb(*home, "invoke", "evil.ok", "{}"),
        "fail": murmur_nb(*home, "invoke", "evil.fail", "{}"),
    }
    for name, done in runs.items():
        assert acting(done.stdout) == [], (name, done.stdout[:2000])
        assert acting(done.stderr) == [], (name, done.stderr[:2000])
        assert "café".encode() in done.stdout, name
    listed: Any = json.loads(runs["list"].stdout)
    assert listed[0]["name"] == f"name {SAID}"
    assert listed[0]["capabilities"][0]["title"] == f"title {SAID}"
    described = json.loads(runs["describe"].stdout)
    assert described["capabilities"][1]["summary"] == f"summary {SAID}"
    ok = json.loads(runs["ok"].stdout)
    assert ok["result"] == {"text": SAID} and ok["warnings"] == [f"warning {SAID}"]
    failed = json.loads(runs["fail"].stdout)
    assert runs["fail"].returncode == 1
    assert failed["error"]["code"] == f"code {SAID}"
    assert failed["error"]["message"] == f"message {SAID}"


def test_check_report_keeps_module_words_off_the_terminal(hostile_home: Path) -> None:
    """``murmur-nb check`` quotes an unmet requirement's name and detail (the skipped rows)
    and an unknown key (the warning's path): fails before: printed raw, the terminal retitled
    and cleared, a green PASS forged; now escaped in the text report and in ``--json``."""
    folder = hostile_home / "modules" / "evil"
    (folder / "unmet").write_text("")
    text = murmur_nb("check", str(folder))
    assert text.returncode in (0, 1), text.stderr[-2000:]
    assert acting(text.stdout) == [], text.stdout[:3000]
    said = text.stdout.decode()
    assert "detail \\x1b]0;owned\\x07\\x1b[2J" in said  # escaped, not dropped
    assert "key \\x1b]0;owned" in said
    report = murmur_nb("check", "--json", str(folder))
    assert acting(report.stdout) == [], report.stdout[:3000]
    rows = json.loads(report.stdout)["checks"]
    assert any("detail \\x1b]0;owned" in row["detail"] for row in rows)


def test_check_report_cuts_a_megabytes_long_key(hostile_home: Path) -> None:
    """A descriptor key of 4 MiB is quoted in its warning's path and (``repr``'d) in its
    detail: fails before: an 8.6 MB text report (and as much JSON); now the key is cut to a
    label's length, and the report stays a few kilobytes."""
    folder = hostile_home / "modules" / "evil"
    (folder / "big_key").write_text(str(4 << 20))
    for flags in ([], ["--json"]):
        done = murmur_nb("check", *flags, str(folder))
        assert done.returncode in (0, 1), done.stderr[-2000:]
        assert len(done.stdout) < 100_000, (flags, len(done.stdout))
        assert "kkkk…".encode() in done.stdout


def test_a_hook_result_repr_keeps_the_hooks_err_off_the_terminal(tmp_path: Path) -> None:
    """``repr(result)`` (a notebook's ``text/plain``, ``print`` in a terminal) of a call whose
    hook answered ``err`` with escapes: fails before: the err was quoted raw, the terminal
    retitled and cleared; now on one line, cut, its escapes escaped."""
    _, config = capsule(tmp_path, 1)
    with mnb.HookHost.from_config(config) as hooks:
        result = hooks.task_start(task_id="t", context_id="c")["hostile"]
    assert result.code == "guest_error" and result.error is not None and "\x1b" in result.error
    shown = repr(result)
    no_control(shown)
    assert "\\x1b]0;owned\\x07" in shown and "\\u202eevil" in shown
