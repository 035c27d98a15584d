"""Hook components for the tests, assembled from the core modules in ``tests/wat/``."""

from __future__ import annotations

from pathlib import Path

import wasmtime

WAT = Path(__file__).with_name("wat")


def component_text(core_file: str) -> str:
    """``component.wat`` with the core module of ``tests/wat/<core_file>`` spliced in."""
    core = (WAT / core_file).read_text(encoding="utf-8")
    body = core[core.index("(module") + len("(module") :]
    text = (WAT / "component.wat").read_text(encoding="utf-8")
    return text.replace("(core module $main @MAIN@)", "(core module $main" + body)


def assemble(core_file: str) -> bytes:
    """A component binary: the core module spliced into ``component.wat``."""
    return wasmtime.wat2wasm(component_text(core_file))
