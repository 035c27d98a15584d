"""Hook components for the tests, assembled from the core modules in ``tests/wat/``."""

from __future__ import annotations

from pathlib import Path

import wasmtime

WAT = Path(__file__).with_name("wat")
#: component.wat's "host" instance, and the one that also gives the hook wasi:random
HOST = '(core instance $host (export "read-messages" (func $read-lowered)))'
RANDOM = """(import "wasi:random/random@0.2.0" (instance $random
    (export "get-random-u64" (func (result u64)))))
  (alias export $random "get-random-u64" (func $get-random-u64))
  (core func $random-lowered (canon lower (func $get-random-u64)))
  (core instance $host (export "read-messages" (func $read-lowered))
                       (export "random" (func $random-lowered)))"""


def component_text(core_file: str) -> str:
    """``component.wat`` with the core module of ``tests/wat/<core_file>`` spliced in."""
    core = (WAT / core_file).read_text(encoding="utf-8")
    body = core[core.index("(module") + len("(module") :]
    text = (WAT / "component.wat").read_text(encoding="utf-8")
    return text.replace("(core module $main @MAIN@)", "(core module $main" + body)


def assemble(core_file: str) -> bytes:
    """A component binary: the core module spliced into ``component.wat``."""
    return wasmtime.wat2wasm(component_text(core_file))
