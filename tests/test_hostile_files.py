"""What an operator names by configuration, given values and files made to break what reads them.

The environment variables' numbers, past what the OS calls they end in take:

* ``MURMUR_NB_HOOK_COMPILE_S=10000000000`` (no bound, meant) raised ``OverflowError:
  timestamp out of range for platform time_t`` out of ``HookHost.from_config`` (a socket's
  timeout); ``MURMUR_NB_HOOK_COMPILE_MB=8796093022208`` killed every compiling child at its
  start (``RLIMIT_DATA`` in bytes past a C ``long``), each hook refused with "report it".
  Each is now a ``HookConfigWarning`` naming the variable and the most it takes, and hooks
  compile under that most.
* ``MURMUR_NB_SANDBOX_TMPFS`` of 2**64 bytes or more (or ``Policy(sandbox_tmpfs_bytes=)``
  so large) made bwrap refuse every sandbox, and each module was refused with "Fix the
  module's describe output"; ``MURMUR_NB_SANDBOX_TMPFS=²`` (a digit to ``str.isdigit``)
  raised ``invalid literal for int()``. Each is now refused when the host first runs a
  module (the policy when it is made), naming the variable (the field) and the most it takes.

The files named: a ``murmur.yaml`` comes with a capsule, from whoever wrote it, and names its
components; ``--policy`` and ``--input-file`` name files on the command line:

* a ``murmur.yaml`` that is a FIFO hung ``HookHost.from_config`` in its open, forever; one
  that is a link to ``/dev/zero``, or a sparse file of gigabytes, was read whole until the
  memory ran out (``MemoryError``, or the OOM killer for a kernel without a bound); one of
  9 MB held it 50 s in PyYAML; one that is not UTF-8 raised ``UnicodeDecodeError``. Each is
  now a ``HookConfigError`` saying what the file is, at once (at most 1 MiB is read).
* a hook component that is a sparse file of a terabyte was read whole (``MemoryError`` out
  of ``HookHost.from_config``); one that is a FIFO or a link to ``/dev/zero`` was said not
  to exist. A component is now read from one descriptor, a regular file of at most what its
  compile may use (``$MURMUR_NB_HOOK_COMPILE_MB``), else its hook does not load, saying so.
* ``--policy`` or ``--input-file`` naming ``/dev/zero`` (or ``--input-file -`` reading it)
  was read until ``MemoryError`` ended the command with a traceback; now a usage error
  (exit 2) past 1 MiB (a policy) or 64 MiB (an input). A FIFO or ``<(...)`` is still read.

Each attack that could hang or take the memory runs in a child interpreter with a 4 GiB
address space and a timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import murmur_nb as mnb

# private: the one LEB128 encoder of the hooks' binary reader, to write a component by hand
from murmur_nb._hooks.guest_code.wasm_binary import uleb

HOOK = "hooks:\n  slow:\n    component: hooks/slow.wasm\n"


def empty_functions(functions: int) -> bytes:
    """A component of ``functions`` empty functions (4 bytes each; past 4 KiB it compiles in
    a child process) that exports no handler: it compiles, then its load fails on that."""
    types = b"\x01\x60\x00\x00"
    funcs = uleb(functions) + b"\x00" * functions
    code = uleb(functions) + b"\x02\x00\x0b" * functions
    module = b"\0asm\x01\0\0\0" + b"".join(
        bytes([sid]) + uleb(len(s)) + s for sid, s in ((1, types), (3, funcs), (10, code))
    )
    return b"\0asm\x0d\0\x01\0\x01" + uleb(len(module)) + module


def capsule(tmp_path: Path, component: bytes) -> Path:
    (tmp_path / "hooks").mkdir(exist_ok=True)
    (tmp_path / "hooks" / "slow.wasm").write_bytes(component)
    (tmp_path / "murmur.yaml").write_text(HOOK, encoding="utf-8")
    return tmp_path / "murmur.yaml"


@pytest.mark.parametrize(
    ("variable", "value", "most"),
    [
        ("MURMUR_NB_HOOK_COMPILE_S", "10000000000", "1,000,000 seconds"),
        ("MURMUR_NB_HOOK_COMPILE_MB", str(1 << 43), "1,073,741,824 MiB"),
    ],
)
def test_a_compile_bound_past_what_the_os_takes_is_warned_and_hooks_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, most: str
) -> None:
    """Before: ``OverflowError`` out of ``HookHost.from_config`` (seconds), or every compile's
    child dead at its start and the hook refused with "report it" (MiB)."""
    monkeypatch.setenv("MURMUR_NB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(variable, value)
    path = capsule(tmp_path, empty_functions(2_000))  # 8 KiB: compiled in a child
    with pytest.warns(mnb.HookConfigWarning) as caught, mnb.HookHost.from_config(path) as hooks:
        info = hooks.hooks["slow"]
    (warning,) = caught
    text = str(warning.message)
    assert f"${variable}={value!r}" in text and f"the most it takes, {most}" in text, text
    assert "does not export" in (info.load_error or ""), info.load_error  # it compiled


@pytest.mark.parametrize("value", [f"{10**24}G", str(1 << 64), "²", "1048577G"])
def test_a_tmpfs_bound_the_sandbox_cannot_take_is_refused_naming_the_variable(
    facet_home: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """Before: bwrap refused every sandbox ("--size takes a non-zero number of bytes") and
    each module was refused as if its describe were broken; ``²`` raised ``ValueError:
    invalid literal for int()``."""
    monkeypatch.setenv("MURMUR_NB_SANDBOX_TMPFS", value)
    said = r"MURMUR_NB_SANDBOX_TMPFS=.* at most 1048576G"
    with mnb.ModuleHost(home=facet_home) as host:
        with pytest.raises(ValueError, match=said):
            host.modules()
        with pytest.raises(ValueError, match=said):
            host.invoke("good.echo", {"count": 1})


def test_the_largest_tmpfs_bound_runs_a_module(
    facet_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MURMUR_NB_SANDBOX_TMPFS", "1048576G")
    with mnb.ModuleHost(home=facet_home) as host:
        inv = host.invoke("good.echo", {"count": 1})
    assert inv.ok, inv.error


def test_a_policy_tmpfs_bound_the_sandbox_cannot_take_is_refused() -> None:
    """Before: accepted, and every module was then refused by bwrap."""
    with pytest.raises(ValueError, match=r"Policy.sandbox_tmpfs_bytes=.*above the most"):
        mnb.Policy(sandbox_tmpfs_bytes=1 << 64)
    assert mnb.Policy(sandbox_tmpfs_bytes=1 << 50).sandbox_tmpfs_bytes == 1 << 50


#: what each hostile file is made as: a FIFO, a link to /dev/zero, a sparse file of 8 GiB
FILE_KINDS = ["fifo", "zero", "sparse"]


def hostile_file(path: Path, kind: str, start: bytes = b"") -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    else:
        with path.open("wb") as out:
            out.write(start)
            out.truncate(8 << 30)


def in_child(code: str, *, stdin: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter with at most 4 GiB of address space (a read of
    ``/dev/zero`` ends in ``MemoryError``, not in the machine's memory), killed after 20 s."""
    bound = "import resource; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
    try:
        with (stdin or Path(os.devnull)).open("rb") as given:
            command = [sys.executable, "-c", bound + textwrap.dedent(code)]
            return subprocess.run(command, stdin=given, capture_output=True, text=True,
                                  timeout=20, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("still reading after 20 s (killed)")


@pytest.mark.parametrize("kind", FILE_KINDS)
def test_a_murmur_yaml_that_never_ends_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    """Before: the FIFO hung ``HookHost.from_config`` in its open; ``/dev/zero`` and the
    sparse file ended in ``MemoryError``."""
    path = tmp_path / "murmur.yaml"
    hostile_file(path, kind, b"hooks: {}\n")
    done = in_child(f"""
        import murmur_nb as mnb
        try:
            mnb.HookHost.from_config({str(path)!r})
        except mnb.HookConfigError as exc:
            print(exc)
    """)
    said = {
        "fifo": "it is a FIFO, not a regular file",
        "zero": "it is a character device, not a regular file",
        "sparse": "it is 8,589,934,592 bytes, more than the 1,048,576 it may be",
    }[kind]
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"cannot read the hook configuration ({said})" in done.stdout, done.stdout


def test_a_murmur_yaml_past_a_mebibyte_or_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    """Before: a long file was parsed at ~200 KB a second (9 MB: 50 s); one that is not UTF-8
    raised ``UnicodeDecodeError`` out of ``HookHost.from_config``."""
    path = tmp_path / "murmur.yaml"
    path.write_text("hooks: {}\n" + "#\n" * (1 << 19), encoding="utf-8")  # 1 MiB and 10 bytes
    with pytest.raises(mnb.HookConfigError, match=r"more than the 1,048,576 it may be"):
        mnb.HookHost.from_config(path)
    path.write_bytes(b"hooks:\n  h: {component: \"\xff.wasm\"}\n")
    with pytest.raises(mnb.HookConfigError, match=r"can't decode byte 0xff.*a UTF-8 text file"):
        mnb.HookHost.from_config(path)


def test_a_component_of_a_terabyte_is_refused_unread(tmp_path: Path) -> None:
    """Before: read whole, ``MemoryError`` out of ``HookHost.from_config`` (a kernel with no
    bound on its memory would try to hold it)."""
    (tmp_path / "hooks").mkdir()
    with (tmp_path / "hooks" / "slow.wasm").open("wb") as out:
        out.write(b"\0asm\x0d\0\x01\0")
        out.truncate(1 << 40)
    (tmp_path / "murmur.yaml").write_text(HOOK, encoding="utf-8")
    done = in_child(f"""
        import murmur_nb as mnb
        with mnb.HookHost.from_config({str(tmp_path / "murmur.yaml")!r}) as hooks:
            print(hooks.hooks["slow"].load_error)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "it is 1,099,511,627,776 bytes, more than the 2,147,483,648 it may be" in done.stdout
    assert "$MURMUR_NB_HOOK_COMPILE_MB: 2,048 MiB" in done.stdout, done.stdout


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_a_component_that_is_no_file_says_so(tmp_path: Path, kind: str) -> None:
    """Before: "does not exist; build the hook"."""
    (tmp_path / "hooks").mkdir()
    hostile_file(tmp_path / "hooks" / "slow.wasm", kind)
    (tmp_path / "murmur.yaml").write_text(HOOK, encoding="utf-8")
    with mnb.HookHost.from_config(tmp_path / "murmur.yaml") as hooks:
        info = hooks.hooks["slow"]
    assert not info.loaded and "is not a regular file" in (info.load_error or ""), info


@pytest.mark.parametrize("flag", ["--policy", "--input-file", "-"])
def test_a_command_reading_dev_zero_stops_with_a_usage_error(
    tmp_path: Path, facet_home: Path, flag: str
) -> None:
    """Before: read until ``MemoryError``, a traceback (exit 1)."""
    zero = tmp_path / "given.yaml"
    zero.symlink_to("/dev/zero")
    options = {"--policy": ["--policy", str(zero), "invoke", "good.echo", "{}"],
               "--input-file": ["invoke", "good.echo", "--input-file", str(zero)],
               "-": ["invoke", "good.echo", "--input-file", "-"]}[flag]  # fmt: skip
    done = in_child(f"""
        import sys
        from murmur_nb._checker.cli import main  # private: the command, under the child's bound
        sys.exit(main(["--home", {str(facet_home)!r}, *{options!r}]))
    """, stdin=zero if flag == "-" else None)
    most = "1,048,576" if flag == "--policy" else "67,108,864"
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"more than the {most}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_the_component_cache_hashes_no_file_that_never_ends(tmp_path: Path, kind: str) -> None:
    """``ComponentCache.load`` hashes the component before it reads it (its digest is the
    key): a component swapped for a FIFO after the host's check hung that hash in its open,
    a link to ``/dev/zero`` never ended. Now refused at once, saying what it is."""
    hostile_file(tmp_path / "swapped.wasm", kind)
    done = in_child(f"""
        from pathlib import Path
        from murmur_nb._hooks.runtime import Runtime  # private: the cache the hooks load from
        from murmur_nb._rules import NotReadable  # private: what a file no hash can end is
        try:
            Runtime.get().cache.load(Path({str(tmp_path / "swapped.wasm")!r}))
        except NotReadable as exc:
            print(exc)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    kind_said = {"fifo": "a FIFO", "zero": "a character device"}[kind]
    assert done.stdout.strip() == f"it is {kind_said}, not a regular file", done.stdout
