"""Small hostile inputs: odd files where a file is read, numbers past what a reader holds.

* A hook's build is keyed by every source file in its folder. They were read with
  ``read_bytes()``: a FIFO named ``x.py`` there hung ``build_python_hook`` (and the kernel)
  forever, a link ``z.py -> /dev/zero`` read until memory ran out, and an editor's lock file
  (a dangling link ``.#app.py``) failed the build with a bare ``FileNotFoundError``.
  componentize-py itself reads none of them (it reads what the hook imports).
* A knowledge document (a skill, an overlay) that is a FIFO was opened before it was found
  not to be a regular file: the open released a writer waiting on the FIFO.
* ``Policy.deadline_ms_limit`` and ``max_output_bytes_limit`` had no upper bound, so a
  ``deadline_ms`` past ``2**63 - 1`` reached every module, and a module written in Go (whose
  request struct reads it into an ``int``) failed to decode every request.
* ``RFC3339_RE`` used ``\\d``, which in Python takes any Unicode digit: a ``created_at`` in
  Arabic-Indic or fullwidth digits passed the writer's form check and was refused as a
  "month or day past the calendar".
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from importlib.util import find_spec
from pathlib import Path

import pytest
from _modules import default_descriptor, install, write_descriptor

import murmur_nb as mnb
from murmur_nb._hooks.build import DEMO_HOOK_SOURCE  # private: a real hook, built once

needs_componentize = pytest.mark.skipif(
    find_spec("componentize_py") is None, reason="needs componentize-py (murmur-nb[hooks])"
)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def _build_in_child(source: Path, timeout: float = 60) -> dict[str, str]:
    """``build_python_hook(source)`` in a child with 2 GiB of memory, which must end within
    ``timeout``: what it returned or raised."""
    script = (
        "import json, sys, murmur_nb as m\n"
        "try:\n"
        "    print(json.dumps({'built': str(m.build_python_hook(sys.argv[1]))}))\n"
        "except Exception as exc:\n"
        "    print(json.dumps({'error': type(exc).__name__, 'code': getattr(exc, 'code', ''),"
        " 'message': str(exc)}))\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", script, str(source)], capture_output=True, text=True,
            timeout=timeout, preexec_fn=_limit_memory, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"build_python_hook({source}) did not return within {timeout} s")
    assert done.stdout, done.stderr[-2000:]
    result: dict[str, str] = json.loads(done.stdout.splitlines()[-1])
    return result


def _hook_folder(tmp_path: Path) -> Path:
    """A copy of the demo hook's folder; its build has the demo's key (cached once built)."""
    folder = tmp_path / "hook"
    shutil.copytree(DEMO_HOOK_SOURCE.parent, folder)
    return folder / DEMO_HOOK_SOURCE.name


@needs_componentize
@pytest.mark.parametrize("odd", ["fifo", "dev-zero-link"])
def test_an_odd_file_beside_a_python_hook_is_refused_at_once_by_name(
    tmp_path: Path, odd: str
) -> None:
    source = _hook_folder(tmp_path)
    planted = source.parent / "helpers" / "x.py"
    planted.parent.mkdir()
    if odd == "fifo":
        os.mkfifo(planted)
    else:
        planted.symlink_to("/dev/zero")
    started = time.monotonic()
    got = _build_in_child(source)
    assert time.monotonic() - started < 30
    assert (got.get("error"), got.get("code")) == ("HookError", "hook_build_failed"), got
    kind = "a FIFO" if odd == "fifo" else "a character device"
    assert f"{planted}, in the folder of the hook app.py, is {kind}" in got["message"]
    assert "put the hook in a folder of its own" in got["message"]


@needs_componentize
def test_a_dangling_link_beside_a_python_hook_is_not_part_of_its_build(tmp_path: Path) -> None:
    """An editor's lock file (Emacs: ``.#app.py -> user@host.1234``) names no file: the build
    is the same as without it."""
    source = _hook_folder(tmp_path)
    alone = _build_in_child(source, timeout=300)
    (source.parent / ".#app.py").symlink_to("root@host.1234:1700000000")
    (source.parent / "loop.py").symlink_to("loop.py")
    beside = _build_in_child(source, timeout=300)
    assert "built" in alone, alone
    assert beside == alone


@needs_componentize
def test_a_build_into_an_output_that_is_a_fifo_is_refused_naming_it(tmp_path: Path) -> None:
    """``output=`` naming a FIFO: the build says which path cannot take the hook and leaves
    it alone (before: a bare ``NotReadable``, "it is a FIFO, not a regular file", naming no
    file)."""
    source = _hook_folder(tmp_path)
    fifo = tmp_path / "hook.wasm"
    os.mkfifo(fifo)
    script = (
        "import json, sys, murmur_nb as m\n"
        "try:\n"
        "    m.build_python_hook(sys.argv[1], output=sys.argv[2])\n"
        "except Exception as exc:\n"
        "    print(json.dumps([type(exc).__name__, getattr(exc, 'code', ''), str(exc)]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(source), str(fifo)],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.stdout, done.stderr[-2000:]
    kind, code, message = json.loads(done.stdout.splitlines()[-1])
    assert (kind, code) == ("HookError", "hook_build_failed"), (kind, code, message)
    assert f"output={str(fifo)!r} cannot take the built hook: it is a FIFO" in message
    assert "name the path of a regular file" in message
    assert fifo.is_fifo()


@needs_componentize
def test_the_source_files_a_build_is_keyed_by_are_bounded(tmp_path: Path) -> None:
    source = _hook_folder(tmp_path)
    with (source.parent / "huge.py").open("wb") as sparse:
        sparse.truncate(600 << 20)  # a sparse file: no disk, but 600 MiB to read
    got = _build_in_child(source)
    assert got.get("code") == "hook_build_failed", got
    assert "hold more than 512 MiB" in got["message"]
    assert f"the last one read was {source.parent / 'huge.py'}" in got["message"]


def _blocked_writer(fifo: Path) -> subprocess.Popen[str]:
    """A process opening ``fifo`` to write, blocked in that open until someone opens it to
    read (then it exits)."""
    writer = subprocess.Popen(
        [sys.executable, "-c", f"open({str(fifo)!r}, 'wb')"], text=True
    )
    wchan = Path(f"/proc/{writer.pid}/wchan")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and writer.poll() is None:
        if wchan.exists() and wchan.read_text().strip() in {"wait_for_partner", "fifo_open"}:
            break
        time.sleep(0.02)
    else:
        time.sleep(0.5)  # no wchan to show it: give it time to reach the open
    return writer


def test_a_skill_that_is_a_fifo_is_never_opened(tmp_path: Path) -> None:
    """A module whose skill is a FIFO a process waits to write: loading the skill is refused
    and leaves the writer waiting (before, the open released it)."""
    home = tmp_path / "home"
    folder = install(home, "k")
    desc = default_descriptor(home, "k")
    desc["skills"] = [{"id": "k.intro", "title": "Intro", "summary": "About k.",
                       "path": "intro.md", "digest": "sha256:" + "0" * 64,
                       "tokens": 5}]  # fmt: skip
    write_descriptor(folder, desc)
    os.mkfifo(folder / "intro.md")
    writer = _blocked_writer(folder / "intro.md")
    try:
        with (
            mnb.ModuleHost(home=home, artifact_store=tmp_path / "store") as host,
            pytest.raises(mnb.ConfinementViolation) as err,
        ):
            host.load_skill("k", "k.intro")
        time.sleep(0.3)
        assert writer.poll() is None, "loading the skill opened the FIFO: the writer ran on"
        assert "is not a regular file (it is a FIFO, not a regular file)" in str(err.value)
    finally:
        os.close(os.open(folder / "intro.md", os.O_RDONLY | os.O_NONBLOCK))  # let it go
        writer.wait(timeout=10)


FACET_MODULES = [("hostile", "hostile_output")]
GO_INT_MOST = 2**63 - 1  # a Go int on a 64-bit machine; the seed's Request reads both into one

_GO_DECODER = r"""
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

type Request struct {
	DeadlineMS     int `json:"deadline_ms"`
	MaxOutputBytes int `json:"max_output_bytes"`
}

func main() {
	var r Request
	err := json.NewDecoder(os.Stdin).Decode(&r)
	fmt.Println(r.DeadlineMS, r.MaxOutputBytes, err)
}
"""


@pytest.mark.parametrize("bound", ["deadline_ms_limit", "max_output_bytes_limit"])
def test_a_policy_bound_past_a_go_int_is_refused(bound: str) -> None:
    with pytest.raises(ValueError, match=rf"Policy.{bound}=9223372036854775808 is above "
                       r"9223372036854775807 \(2\*\*63 - 1\)") as err:  # fmt: skip
        mnb.Policy(**{bound: GO_INT_MOST + 1})
    assert "module written in Go" in str(err.value)


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain (golang-go)")
def test_the_largest_bounds_a_policy_takes_reach_a_go_module_intact(
    facet_home: Path, tmp_path: Path
) -> None:
    """What a module is sent under the largest bounds, read by Go's encoding/json into the
    seed's ``int`` fields; one more (before: taken, and every request undecodable) is refused."""
    most = GO_INT_MOST
    policy = mnb.Policy(deadline_ms=most, deadline_ms_limit=most,
                        max_output_bytes=most, max_output_bytes_limit=most)  # fmt: skip
    with mnb.ModuleHost(home=facet_home, policy=policy, runs_dir=tmp_path / "runs") as host:
        sent = host.invoke("hostile.echo", {}).result["raw"]
    (tmp_path / "main.go").write_text(_GO_DECODER)
    env = {**os.environ, "GOPATH": str(tmp_path / "gp"), "GO111MODULE": "off", "GOFLAGS": ""}
    read = subprocess.run(
        ["go", "run", str(tmp_path / "main.go")], input=sent, text=True, capture_output=True,
        env=env, check=True, timeout=300,
    ).stdout.strip()  # fmt: skip
    assert read == f"{GO_INT_MOST} {GO_INT_MOST} <nil>"
    with pytest.raises(ValueError, match="is above 9223372036854775807"):
        mnb.Policy(deadline_ms=GO_INT_MOST + 1, deadline_ms_limit=GO_INT_MOST + 1)


@pytest.mark.parametrize(
    "stamp",
    ["\u0662\u0660\u0662\u0666-\u0660\u0661-\u0660\u0662T\u0660\u0663:\u0660\u0664:\u0660\u0665Z",
     "\uff12\uff10\uff12\uff16-\uff10\uff11-\uff10\uff12T\uff10\uff13:\uff10\uff14:\uff10\uff15Z",
     "2026-01-02T03:04:05+\u0660\u0665:\u0660\u0660"],
)  # fmt: skip
def test_a_created_at_in_other_digits_is_refused_for_its_form(
    murmur_home: Path, stamp: str
) -> None:
    """Arabic-Indic and fullwidth digits are digits to Python's ``\\d``, not to RFC 3339."""
    with mnb.RecordWriter(murmur_home, "c") as writer:
        with pytest.raises(ValueError, match="is not an RFC 3339 time with its zone"):
            writer.append("user", "hi", id="m1", created_at=stamp)
        writer.append_raw(
            json.dumps({"id": "m2", "role": "user", "content": "hi", "created_at": stamp}) + "\n"
        )
    frame = mnb.read_conversation("c", murmur_home)
    assert list(frame["id"]) == ["m2"] and frame["created_at"].isna().all()
