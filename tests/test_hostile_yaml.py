"""A ``murmur.yaml`` or a ``--policy`` file made to hang or crash whatever reads it.

A capsule's ``murmur.yaml`` comes with the capsule, from whoever wrote it: nine lines of
nested aliases (each a list of ten ``*a`` of the line before) stand for 2.3 billion values,
and ``HookHost.from_config`` never returned (an error message printed one of them); a list
nested a few thousand levels deep raised ``RecursionError`` out of PyYAML's composer. Each
is now a ``HookConfigError`` (a usage error from the command) naming what to change, at once.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import murmur_nb as mnb
from murmur_nb import HookConfigError
from murmur_nb._checker.cli import main  # private: the console script's main(argv), in-process
from murmur_nb._hooks.config import (  # private: murmur.yaml parsed, no component loaded
    MAX_YAML_DEPTH,
    MAX_YAML_VALUES,
    load_hook_config,
)


def laughs(key: str, levels: int = 9) -> str:
    """``key: *a<levels-1>`` after ``levels`` lines of anchors, each ten aliases of the last:
    ``10 ** levels`` events in a kilobyte."""
    lines = ["a0: &a0 [" + ", ".join(["task-start"] * 10) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + f"\n{key}: *a{levels - 1}\n"


def capsule(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "capsule" / "murmur.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_nested_aliases_do_not_hang_loading_the_hooks(tmp_path: Path) -> None:
    """In a child with a minute to finish: before, it was still working when killed."""
    hook = "\nhooks:\n  h:\n    component: h.wasm\n    events:"
    text = laughs("events").replace("\nevents:", hook)
    path = capsule(tmp_path, text)
    assert len(text) < 1200
    program = (
        "import sys, murmur_nb as mnb\n"
        "try:\n    mnb.HookHost.from_config(sys.argv[1])\n"
        "except mnb.HookConfigError as exc:\n    print(exc)\n"
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", program, str(path)], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - started < 30
    said = done.stdout.strip()
    assert said.startswith(f"{path}: refused at line 1, column 1: its aliases (*name) expand it")
    assert "1,000,000,000" not in said and len(said) < 400, said
    assert f"more than the {MAX_YAML_VALUES:,} a configuration may stand for" in said


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    """Before: the hook loaded with a capabilities mapping that held itself."""
    text = "hooks: &h\n  h:\n    component: h.wasm\n    capabilities: *h\n"
    with pytest.raises(HookConfigError, match="makes this value hold itself") as info:
        load_hook_config(capsule(tmp_path, text))
    assert "line 1, column 8" in str(info.value)


@pytest.mark.parametrize("levels", [MAX_YAML_DEPTH + 1, 5000])
def test_a_deeply_nested_file_is_a_config_error(tmp_path: Path, levels: int) -> None:
    """Before: ``RecursionError`` out of ``HookHost.from_config`` at 5,000 levels."""
    nested = "[" * levels + "]" * levels
    path = capsule(tmp_path, f"hooks:\n  h:\n    component: h.wasm\n    events: {nested}\n")
    with pytest.raises(HookConfigError, match=f"nested deeper than {MAX_YAML_DEPTH} levels"):
        mnb.HookHost.from_config(path)


def test_aliases_that_stay_small_and_long_files_without_them_load(tmp_path: Path) -> None:
    """The bound is on what aliases multiply: shared limits load, and so does a file that
    writes out more values than the bound."""
    shared = """\
hook_limits: &limits {time_ms: 3000, memory_mib: 64}
hooks:
  a: {component: a.wasm, limits: *limits}
  b: {component: b.wasm, limits: *limits, events: &ev [compact]}
  c: {component: c.wasm, events: *ev}
"""
    a, b, c = load_hook_config(capsule(tmp_path, shared)).hooks
    assert a.limits.time_ms == b.limits.time_ms == 3000 and c.events == b.events == ("compact",)
    deep = "[" * (MAX_YAML_DEPTH - 10) + "]" * (MAX_YAML_DEPTH - 10)
    load_hook_config(capsule(tmp_path, f"extra: {deep}\nhooks:\n  h: {{component: h.wasm}}\n"))
    written = "hooks:\n  h:\n    component: h.wasm\n    events: [" + ", ".join(
        ["compact"] * (MAX_YAML_VALUES + 1)
    ) + "]\n"  # fmt: skip
    (entry,) = load_hook_config(capsule(tmp_path, written)).hooks
    assert entry.events == ("compact",)


def test_a_policy_file_of_nested_aliases_is_refused(tmp_path: Path, facet_home: Path) -> None:
    """``approved: *a8`` (a billion module ids) through ``murmur-nb --policy``: refused, in a
    child with a minute to finish."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(laughs("approved"), encoding="utf-8")
    argv = ["--home", str(facet_home), "--policy", str(policy), "list"]
    done = subprocess.run([sys.executable, "-m", "murmur_nb", *argv], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith(f"murmur-nb: {policy}: refused: its aliases (*name) expand")
    assert "Traceback" not in done.stderr


def test_json_nested_past_the_reader_is_a_usage_error(
    tmp_path: Path, facet_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A policy, an input or ``--extra`` nested 100,000 levels: a traceback
    (``RecursionError``) before, a usage error now."""
    nested = '{"a":' * 100_000 + "1" + "}" * 100_000
    policy = tmp_path / "policy.json"
    policy.write_text(nested, encoding="utf-8")
    home = ["--home", str(facet_home)]
    for argv, said in (
        ([*home, "--policy", str(policy), "list"], f"murmur-nb: {policy}: is nested too deeply"),
        ([*home, "invoke", "good.echo", "--input-file", str(policy)], "murmur-nb: the input is"),
        ([*home, "invoke", "good.echo", "--extra", nested], "murmur-nb: --extra is nested"),
    ):
        assert main(argv) == 2
        assert capsys.readouterr().err.startswith(said)
