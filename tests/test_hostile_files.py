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
"""

from __future__ import annotations

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
