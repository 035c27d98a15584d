"""The hook checker run on a hook someone else wrote: what the hook returns cannot drive the
reader's terminal, inject markup, blow the report up or crash the checking process.

Each hostile hook is ``tests/wat/component.wat`` with a core module of its own (below), checked
through the public :func:`murmur_nb.check_hook` as a hook author's CI would, under a generous
``time_ms`` (lowering the 10,000-message case takes the host seconds on a loaded machine).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import wasmtime
from _wat import HOST, RANDOM

import murmur_nb as mnb

pytestmark = pytest.mark.slow

WAT = Path(__file__).with_name("wat")

#: What the hostile hook's err says: a terminal title, a screen clear, a forged green PASS,
#: a single-byte CSI (U+009B), a right-to-left override and markup.
SAID = "\x1b]0;owned\x07\x1b[2J\x1b[32mPASS\x1b[0m \u009b31m <script>alert(1)</script> \u202eevil"
#: ``SAID`` as WAT data: every byte of its UTF-8 as a ``\\hh`` escape.
SAID_WAT = "".join(f"\\{b:02x}" for b in SAID.encode("utf-8"))

#: Bytes of the text attack 5 returns: all of the default 16 MiB result limit but the id and
#: role, an emoji first (so Python holds it at 4 bytes a character: 64 MiB).
CONTENT = (16 << 20) - 5

#: The hostile core module; ``@MODE@`` picks the attack. Its memory and allocator come from
#: component.wat ("env"); its answers are built at 64 (a result<_, string> or a list result).
#: 1 every handler answers err(SAID); 2 on-compact returns two messages with one 4 MiB id of
#: NUL bytes; 3 on-compact returns a new tool message whose content is 200,000 ``[``; 4
#: on-compact returns one message whose 4 MiB id is one random letter repeated (so the two
#: rounds differ); 5 on-task-start answers ok with a note of ``CONTENT`` bytes, on-compact
#: with one new message of that content (a hook that passes every rule).
HOSTILE = """(module
  (import "env" "memory" (memory 1))
  (import "env" "realloc" (func $realloc (param i32 i32 i32 i32) (result i32)))
  (import "host" "read-messages" (func $read (param i32 i32 i32 i32 i32)))
  (import "host" "random" (func $random (result i64)))
  (global $mode i32 (i32.const @MODE@))
  (data (i32.const 16) "user")
  (data (i32.const 20) "tool")
  (data (i32.const 24) "t")
  (data (i32.const 256) "@SAID@")

  (func $result (param $tag i32) (param $ptr i32) (param $len i32) (result i32)
    (i32.store8 (i32.const 64) (local.get $tag))
    (i32.store (i32.const 68) (local.get $ptr))
    (i32.store (i32.const 72) (local.get $len))
    (i32.const 64))

  ;; a message record (48 bytes) at $at: id, role, content, name none, created-at none
  (func $message (param $at i32) (param $id i32) (param $id-len i32) (param $role i32)
                 (param $content i32) (param $content-len i32)
    (i32.store (local.get $at) (local.get $id))
    (i32.store offset=4 (local.get $at) (local.get $id-len))
    (i32.store offset=8 (local.get $at) (local.get $role))
    (i32.store offset=12 (local.get $at) (i32.const 4))
    (i32.store offset=16 (local.get $at) (local.get $content))
    (i32.store offset=20 (local.get $at) (local.get $content-len))
    (i32.store8 offset=24 (local.get $at) (i32.const 0))
    (i32.store8 offset=36 (local.get $at) (i32.const 0)))

  ;; @CONTENT@ bytes of text: an emoji, then "a"s
  (func $big-text (result i32)
    (local $big i32)
    (local.set $big (call $realloc (i32.const 0) (i32.const 0) (i32.const 1)
                                   (i32.const @CONTENT@)))
    (memory.fill (local.get $big) (i32.const 97) (i32.const @CONTENT@))
    (i32.store (local.get $big) (i32.const 0x80989ff0))
    (local.get $big))

  (func (export "on-task-start") (param i32 i32 i32 i32) (result i32)
    (if (i32.eq (global.get $mode) (i32.const 5))
      (then (return (call $result (i32.const 0) (call $big-text) (i32.const @CONTENT@)))))
    (if (i32.eq (global.get $mode) (i32.const 1))
      (then (return (call $result (i32.const 1) (i32.const 256) (i32.const @SAID_LEN@)))))
    (call $result (i32.const 0) (i32.const 16) (i32.const 4)))

  (func (export "on-compact") (param $p i32) (param $n i32) (result i32)
    (local $big i32) (local $list i32)
    (if (i32.eq (global.get $mode) (i32.const 1))
      (then (return (call $result (i32.const 1) (i32.const 256) (i32.const @SAID_LEN@)))))
    (if (i32.eq (global.get $mode) (i32.const 2))
      (then
        (local.set $big (call $realloc (i32.const 0) (i32.const 0) (i32.const 1)
                                       (i32.const 0x400000)))
        (local.set $list (call $realloc (i32.const 0) (i32.const 0) (i32.const 4) (i32.const 96)))
        (call $message (local.get $list) (local.get $big) (i32.const 0x400000) (i32.const 16)
                       (i32.const 16) (i32.const 4))
        (call $message (i32.add (local.get $list) (i32.const 48)) (local.get $big)
                       (i32.const 0x400000) (i32.const 16) (i32.const 16) (i32.const 4))
        (return (call $result (i32.const 0) (local.get $list) (i32.const 2)))))
    (if (i32.eq (global.get $mode) (i32.const 3))
      (then
        (local.set $big (call $realloc (i32.const 0) (i32.const 0) (i32.const 1)
                                       (i32.const 200000)))
        (memory.fill (local.get $big) (i32.const 0x5b) (i32.const 200000))
        (local.set $list (call $realloc (i32.const 0) (i32.const 0) (i32.const 4) (i32.const 48)))
        (call $message (local.get $list) (i32.const 24) (i32.const 1) (i32.const 20)
                       (local.get $big) (i32.const 200000))
        (return (call $result (i32.const 0) (local.get $list) (i32.const 1)))))
    (if (i32.eq (global.get $mode) (i32.const 4))
      (then
        (local.set $big (call $realloc (i32.const 0) (i32.const 0) (i32.const 1)
                                       (i32.const 0x400000)))
        (memory.fill (local.get $big)
          (i32.add (i32.const 97) (i32.wrap_i64 (i64.rem_u (call $random) (i64.const 26))))
          (i32.const 0x400000))
        (local.set $list (call $realloc (i32.const 0) (i32.const 0) (i32.const 4) (i32.const 48)))
        (call $message (local.get $list) (local.get $big) (i32.const 0x400000) (i32.const 16)
                       (i32.const 16) (i32.const 4))
        (return (call $result (i32.const 0) (local.get $list) (i32.const 1)))))
    (if (i32.eq (global.get $mode) (i32.const 5))
      (then
        (local.set $list (call $realloc (i32.const 0) (i32.const 0) (i32.const 4) (i32.const 48)))
        (call $message (local.get $list) (i32.const 24) (i32.const 1) (i32.const 16)
                       (call $big-text) (i32.const @CONTENT@))
        (return (call $result (i32.const 0) (local.get $list) (i32.const 1)))))
    (call $result (i32.const 0) (local.get $p) (local.get $n))))
"""


def hostile_component(mode: int) -> bytes:
    """The hostile hook with attack ``mode`` (see :data:`HOSTILE`)."""
    core = (HOSTILE.replace("@MODE@", str(mode)).replace("@SAID@", SAID_WAT)
            .replace("@SAID_LEN@", str(len(SAID.encode("utf-8"))))
            .replace("@CONTENT@", str(CONTENT)))  # fmt: skip
    text = (WAT / "component.wat").read_text(encoding="utf-8")
    text = text.replace("(core module $main @MAIN@)",
                        "(core module $main" + core[core.index("(module") + len("(module"):])
    return wasmtime.wat2wasm(text.replace(HOST, RANDOM))


def capsule(folder: Path, mode: int) -> tuple[Path, Path]:
    """``(component, murmur.yaml)`` of the hostile hook with attack ``mode`` in ``folder``."""
    component = folder / "hooks" / "hostile.wasm"
    component.parent.mkdir(parents=True)
    component.write_bytes(hostile_component(mode))
    config = folder / "murmur.yaml"
    config.write_text("hook_limits: {time_ms: 20000}\nhooks:\n  hostile:\n"
                      "    component: hooks/hostile.wasm\n", encoding="utf-8")  # fmt: skip
    return component, config


def no_control(text: str) -> None:
    """No control character but newline (escape, BEL, CSI, ...) and no bidi override."""
    bad = sorted({hex(ord(c)) for c in text if (ord(c) < 0x20 and c != "\n")
                  or 0x7F <= ord(c) <= 0x9F or c in "\u202a\u202b\u202c\u202d\u202e"})  # fmt: skip
    assert not bad, f"raw control characters {bad} in {text[:600]!r}"


def test_what_a_hook_says_cannot_drive_the_terminal_or_inject_markup(tmp_path: Path) -> None:
    """A hook's err string (its words, up to the result limit) is shown in every view of the
    report: the text and the pytest plugin print it to a terminal, so escapes are escaped;
    the HTML escapes markup; the JSON stays one valid document."""
    component, config = capsule(tmp_path, 1)
    report = mnb.check_hook(component, config=config)
    answer = {r.check: r for r in report}["handlers.answer"]
    assert answer.status == "fail"
    assert "owned" in answer.detail and "evil" in answer.detail  # what it said is still shown
    no_control(report.summary())
    for row in report:
        no_control(row.detail)
    page = report._repr_html_()
    assert "<script" not in page and "&lt;script&gt;" in page
    no_control(page)
    data = json.loads(report.to_json())
    for check in data["checks"]:
        no_control(check["detail"])


def failing(tmp_path: Path, mode: int, rule: str) -> tuple[Any, Any]:
    """The report of checking the hostile hook in ``mode``, and its ``rule`` row, failed."""
    component, config = capsule(tmp_path, mode)
    report = mnb.check_hook(component, config=config)
    row = {r.check: r for r in report}[rule]
    assert row.status == "fail"
    return report, row


def assert_small(report: Any) -> None:
    """Every view of ``report`` stays under 64 KiB."""
    for view in (report.summary(), report.to_json(), report._repr_html_()):
        assert len(view) < 64 * 1024, f"{len(view):,} characters"


def test_a_huge_id_does_not_make_the_report_huge(tmp_path: Path) -> None:
    """A returned list with one 4 MiB id twice (8 MiB of text, within the 16 MiB result
    limit): the report names the repeated id, cut, not 16 MiB of ``\\x00`` per call."""
    report, formed = failing(tmp_path, 2, "messages.well_formed")
    assert "is returned twice" in formed.detail
    assert_small(report)


def test_a_deeply_nested_tool_message_does_not_crash_the_checker(tmp_path: Path) -> None:
    """A new ``tool`` message whose content is 200,000 ``[``: the stdlib's JSON reader gives up
    with RecursionError, which is no tool-message envelope, not the checker's crash."""
    _, formed = failing(tmp_path, 3, "messages.well_formed")
    assert "tool message 't' does not carry the tool-message envelope" in formed.detail


def test_huge_ids_that_differ_between_rounds_do_not_make_the_report_huge(tmp_path: Path) -> None:
    """The determinism row shows what each round answered: the ids it names are cut."""
    report, determinism = failing(tmp_path, 4, "determinism")
    assert "ok with 1 messages (" in determinism.detail
    assert_small(report)


#: Peak memory of the checking process, in MiB, with the hook of attack 5 (run by
#: :func:`test_the_checker_holds_one_result_at_a_time`).
PEAK = """
import resource, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from test_hostile_hook_check import capsule
import murmur_nb as mnb
component, config = capsule(Path(sys.argv[2]), int(sys.argv[3]))
report = mnb.check_hook(component, config=config, progress=False)
print(report.ok, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def peak_mib(folder: Path, mode: int) -> tuple[str, int]:
    """Check the hook of attack ``mode`` in a fresh interpreter: ``(ok, peak RSS in MiB)``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH")]))}
    folder.mkdir()
    done = subprocess.run([sys.executable, "-c", PEAK, str(Path(__file__).parent), str(folder),
                           str(mode)], capture_output=True, text=True, env=env, timeout=300,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    ok, peak = done.stdout.split()
    return ok, int(peak)


def test_the_checker_holds_one_result_at_a_time(tmp_path: Path) -> None:
    """A hook whose every answer is a note or a message of 16 MiB (the default result limit;
    64 MiB as Python text) passes: the checker keeps what each rule needs of a call (its code,
    a digest of its answer, the problem with it), not all 30 answers at once (1.9 GB)."""
    _, quiet = peak_mib(tmp_path / "quiet", 0)  # the same hook answering little
    ok, loud = peak_mib(tmp_path / "loud", 5)
    assert ok == "True"
    assert loud - quiet < 512, f"{quiet} MiB for a quiet hook, {loud} MiB for this one"
