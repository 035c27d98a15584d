"""murmur.yaml -> hook configuration: paths, grants, events, limits, and errors that help."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from murmur_nb import HookConfigError
from murmur_nb._hooks.config import (  # private: murmur.yaml parsed, no component loaded
    DEFAULT_MEMORY_MIB,
    DEFAULT_TIME_MS,
    HookLimits,
    load_hook_config,
)

SPEC_EXAMPLE = """\
inference:
  transport: api            # or: process (no record; reads return an empty page)
hooks:
  summarize:
    component: hooks/summarize.wasm   # relative to this file
    events: [task-start, compact]
    capabilities:
      conversation:
        read: true
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "capsule" / "murmur.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_spec_example_parses_with_paths_relative_to_the_file(tmp_path: Path) -> None:
    config = load_hook_config(write(tmp_path, SPEC_EXAMPLE))
    assert config.transport == "api"
    (entry,) = config.hooks
    assert entry.id == "summarize"
    assert entry.component == tmp_path / "capsule" / "hooks" / "summarize.wasm"
    assert entry.events == ("task-start", "compact")
    assert entry.read_granted is True
    assert entry.limits == HookLimits()
    assert entry.notes == ()


def test_absolute_component_path_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "h.wasm"
    config = load_hook_config(write(tmp_path, f"hooks:\n  h:\n    component: {target}\n"))
    assert config.hooks[0].component == target


def test_events_default_to_all_and_are_deduplicated_in_dispatch_order(tmp_path: Path) -> None:
    text = """\
hooks:
  a: {component: a.wasm}
  b: {component: b.wasm, events: [compact, task-start, compact]}
  c: {component: c.wasm, events: compact}
"""
    a, b, c = load_hook_config(write(tmp_path, text)).hooks
    assert a.events == ("task-start", "compact")
    assert b.events == ("task-start", "compact")
    assert c.events == ("compact",)


@pytest.mark.parametrize("value", ["true", "True", "TRUE"])
def test_yaml_boolean_true_grants(tmp_path: Path, value: str) -> None:
    text = (
        "hooks:\n  h:\n    component: h.wasm\n"
        f"    capabilities: {{conversation: {{read: {value}}}}}\n"
    )
    assert load_hook_config(write(tmp_path, text)).hooks[0].read_granted is True


@pytest.mark.parametrize(
    ("value", "noted"),
    [
        ('"true"', True),
        ("'true'", True),
        ("yes", True),
        ("on", True),
        ("y", True),
        ("1", True),
        ("[true]", True),
        ("{enabled: true}", True),
        ("false", False),
        ("null", False),
        ("~", False),
    ],
)
def test_every_other_value_denies(tmp_path: Path, value: str, noted: bool) -> None:
    text = (
        "hooks:\n  h:\n    component: h.wasm\n"
        f"    capabilities: {{conversation: {{read: {value}}}}}\n"
    )
    entry = load_hook_config(write(tmp_path, text)).hooks[0]
    assert entry.read_granted is False
    assert bool(entry.notes) is noted
    if noted:
        assert "hooks.h.capabilities.conversation.read" in entry.notes[0]
        assert "read: true" in entry.notes[0]


@pytest.mark.parametrize(
    "capabilities",
    [
        "",
        "capabilities: {}",
        "capabilities: {conversation: {}}",
        "capabilities: read",
        "capabilities: {conversation: true}",
        "capabilities: {network: {read: true}}",
    ],
)
def test_missing_or_misplaced_grant_denies(tmp_path: Path, capabilities: str) -> None:
    text = f"hooks:\n  h:\n    component: h.wasm\n    {capabilities}\n"
    assert load_hook_config(write(tmp_path, text)).hooks[0].read_granted is False


@pytest.mark.parametrize(
    ("capabilities", "note"),
    [
        ("{conversations: {read: true}}",
         "hooks.h.capabilities.conversations grants nothing here (this host grants only "
         "conversation.read); did you mean 'conversation'?"),
        ("{conversation: {raed: true}}",
         "hooks.h.capabilities.conversation.raed grants nothing here (a hook may only read "
         "the conversation); did you mean 'read'?"),
        ("{conversation: {read: true, write: true}}",
         "hooks.h.capabilities.conversation.write grants nothing here (a hook may only read "
         "the conversation); known keys: read"),
        ("{network: {connect: true}}",
         "hooks.h.capabilities.network grants nothing here (this host grants only "
         "conversation.read); known keys: conversation"),
    ],
)  # fmt: skip
def test_a_grant_this_host_does_not_know_is_noted(
    tmp_path: Path, capabilities: str, note: str
) -> None:
    """A misspelt or unknown grant is not an error (the file is the runtime's too) but is
    no longer passed over without a word: the note says what it grants here (nothing) and
    the key meant. ``read: true`` beside an unknown key still grants."""
    text = f"hooks:\n  h:\n    component: h.wasm\n    capabilities: {capabilities}\n"
    entry = load_hook_config(write(tmp_path, text)).hooks[0]
    assert entry.notes == (note,)
    assert entry.read_granted is ("read: true" in capabilities and "conversation:" in capabilities)


@settings(max_examples=150, deadline=None)
@given(st.from_regex(r"[A-Za-z0-9_]{1,8}", fullmatch=True), st.booleans())
def test_only_the_boolean_true_grants_property(
    tmp_path_factory: pytest.TempPathFactory, token: str, quoted: bool
) -> None:
    scalar = f'"{token}"' if quoted else token
    text = (
        f"hooks:\n  h:\n    component: h.wasm\n    capabilities:\n      conversation:\n"
        f"        read: {scalar}\n"
    )
    path = write(tmp_path_factory.mktemp("prop"), text)
    granted = load_hook_config(path).hooks[0].read_granted
    assert granted is (not quoted and token in {"true", "True", "TRUE"})


def test_limits_default_then_file_defaults_then_per_hook(tmp_path: Path) -> None:
    text = """\
hook_limits: {time_ms: 750, fuel: 123456}
hooks:
  a: {component: a.wasm}
  b: {component: b.wasm, limits: {time_ms: 40, memory_mib: 16, fuel: null}}
"""
    config = load_hook_config(write(tmp_path, text))
    assert config.default_limits == HookLimits(
        time_ms=750, memory_mib=DEFAULT_MEMORY_MIB, fuel=123456
    )
    a, b = config.hooks
    assert a.limits == config.default_limits
    assert b.limits == HookLimits(time_ms=40, memory_mib=16, fuel=None)
    assert HookLimits().time_ms == DEFAULT_TIME_MS


def test_process_transport(tmp_path: Path) -> None:
    config = load_hook_config(write(tmp_path, "inference: {transport: process}\n"))
    assert config.transport == "process"
    assert config.hooks == ()


def test_empty_file_is_an_empty_configuration(tmp_path: Path) -> None:
    config = load_hook_config(write(tmp_path, ""))
    assert config.hooks == ()
    assert config.transport == "api"


def test_unknown_top_level_keys_belong_to_the_runtime_and_are_left_alone(tmp_path: Path) -> None:
    text = "model: some-model\ntools: [a, b]\nhooks: {h: {component: h.wasm}}\n"
    assert [h.id for h in load_hook_config(write(tmp_path, text)).hooks] == ["h"]


@pytest.mark.parametrize(
    ("text", "where", "fix"),
    [
        (
            "hooks:\n  h: {component: h.wasm, capabilites: {}}\n",
            "hooks.h.capabilites",
            "did you mean 'capabilities'",
        ),
        (
            "hooks:\n  h: {component: h.wasm, events: [task-start, on-compact]}\n",
            "hooks.h.events[1]",
            "use one of task-start, compact",
        ),
        (
            "hooks:\n  h: {events: [compact]}\n",
            "hooks.h.component",
            "component: hooks/summarize.wasm",
        ),
        (
            "hooks:\n  h: {component: h.wasm, limits: {time_ms: -5}}\n",
            "hooks.h.limits.time_ms",
            "positive integer",
        ),
        (
            "hooks:\n  h: {component: h.wasm, limits: {time: 5}}\n",
            "hooks.h.limits.time",
            "did you mean 'time_ms'",
        ),
        (
            "hooks:\n  h: {component: h.wasm, limits: {memory_mib: true}}\n",
            "hooks.h.limits.memory_mib",
            "positive integer",
        ),
        ("hook_limits: 5\n", "hook_limits", "expected a mapping"),
        ("hooks:\n  ../evil: {component: h.wasm}\n", "hooks.../evil", "rename the entry"),
        ("hooks:\n  h: h.wasm\n", "hooks.h", "component: <path to .wasm>"),
        ("hooks: [h]\n", "hooks", "mapping of hook id to entry"),
        ("inference: {transport: grpc}\n", "inference.transport", "`api` or `process`"),
        # YAML reads these keys as a number and a boolean: quoting keeps them as ids
        ("hooks:\n  123: {component: h.wasm}\n", "hooks.123", 'quote it (`"123":`)'),
        ("hooks:\n  true: {component: h.wasm}\n", "hooks.true", 'quote it (`"true":`)'),
    ],
)
def test_errors_name_the_path_and_the_fix(tmp_path: Path, text: str, where: str, fix: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(HookConfigError) as info:
        load_hook_config(path)
    message = str(info.value)
    assert str(path) in message
    assert f"{where}:" in message
    assert fix in message
    assert info.value.code == "invalid_config"
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("key", "value", "most"),
    [
        ("fuel", 18446744073709552616, "9,223,372,036,854,775,807"),  # wrapped to 1000
        ("fuel", 2**63, "9,223,372,036,854,775,807"),
        ("memory_mib", 17592186044416, "4,294,967,296"),  # 2**64 bytes: wrapped to 0
        ("memory_mib", 2**32 + 1, "4,294,967,296"),
        ("time_ms", 100000000000000, "2,147,483,647"),  # OverflowError at the first call
        ("time_ms", 2**31, "2,147,483,647"),
        ("memories", 10_001, "10,000"),
        ("tables", 10_001, "10,000"),
        ("instances", 10_001, "10,000"),
        ("table_elements", 2**32, "4,294,967,295"),
        ("result_messages", 2**32, "4,294,967,295"),
        ("result_mib", 4097, "4,096"),
    ],
)
def test_a_limit_past_what_wasmtime_and_the_os_take_is_refused_at_load(
    tmp_path: Path, key: str, value: int, most: str
) -> None:
    """Each limit ends in a fixed-width integer (wasmtime's C API, a thread's wait): past
    it the number wrapped round to a small limit, or none, or failed at the first call."""
    entry = f"hooks:\n  h: {{component: h.wasm, limits: {{{key}: {value}}}}}\n"
    defaults = f"hook_limits: {{{key}: {value}}}\nhooks: {{}}\n"
    for where, text in ((f"hooks.h.limits.{key}", entry), (f"hook_limits.{key}", defaults)):
        path = write(tmp_path, text)
        with pytest.raises(HookConfigError) as info:
            load_hook_config(path)
        message = str(info.value)
        assert message.startswith(
            f"{path} has 1 problem(s):\n  - {where}: expected a positive integer of at most "
            f"{most} ("
        )
        assert f"got {value}; write e.g. `{key}: " in message
    with pytest.raises(ValueError, match=rf"HookLimits\({key}=\.\.\.\): .* at most {most} "):
        HookLimits(**{key: value})


def test_the_largest_limits_load(tmp_path: Path) -> None:
    text = (
        "hooks:\n  h:\n    component: h.wasm\n    limits: {fuel: 9223372036854775807, "
        "memory_mib: 4294967296, time_ms: 2147483647, memories: 10000, tables: 10000, "
        "instances: 10000, table_elements: 4294967295, result_messages: 4294967295, "
        "result_mib: 4096}\n"
    )
    (entry,) = load_hook_config(write(tmp_path, text)).hooks
    assert entry.limits.fuel == 2**63 - 1 and entry.limits.memory_mib == 2**32
    assert entry.limits.memory_bytes_each == 2**52 // 10_000  # within wasmtime's int64
    assert HookLimits(fuel=None).fuel is None


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    text = "hooks:\n  a: {component: a.wasm, events: [nope]}\n  b: {evnts: [compact]}\n"
    with pytest.raises(HookConfigError) as info:
        load_hook_config(write(tmp_path, text))
    message = str(info.value)
    assert "3 problem(s)" in message
    assert "hooks.a.events[0]" in message
    assert "hooks.b.evnts" in message
    assert "hooks.b.component" in message


def test_invalid_yaml_names_line_and_column(tmp_path: Path) -> None:
    with pytest.raises(HookConfigError, match=r"not valid YAML at line 2, column 11"):
        load_hook_config(write(tmp_path, "hooks:\n  h: {a: b: c}\n"))


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [("hooks:\n  a:\n    component: a.wasm\n  a:\n    component: b.wasm\n", "a", 4),
     ("hooks:\n  a:\n    component: a.wasm\n    capabilities: {conversation: {read: true}}\n"
      "    capabilities: {}\n", "capabilities", 5)],
)  # fmt: skip
def test_a_key_given_twice_is_refused_not_replaced(
    tmp_path: Path, text: str, key: str, line: int
) -> None:
    """PyYAML keeps the last of two equal keys: the first hook entry (or a grant) was
    dropped without a word."""
    with pytest.raises(HookConfigError, match=rf"at line {line}, column \d+: the key '{key}' "
                       r"is given twice \(YAML would keep only the last\)"):  # fmt: skip
        load_hook_config(write(tmp_path, text))


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "murmur.yaml"
    with pytest.raises(HookConfigError, match="cannot read the hook configuration") as info:
        load_hook_config(missing)
    assert str(missing) in str(info.value)


def test_document_must_be_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(HookConfigError, match="must be a mapping"):
        load_hook_config(write(tmp_path, "- just\n- a list\n"))


def test_store_limits_parse_and_split_the_memory_total(tmp_path: Path) -> None:
    text = """\
hooks:
  a: {component: a.wasm}
  b:
    component: b.wasm
    limits: {memory_mib: 64, memories: 4, tables: 8, instances: 40, table_elements: 5000}
"""
    a, b = load_hook_config(write(tmp_path, text)).hooks
    assert (a.limits.memories, a.limits.tables, a.limits.instances) == (1, 4, 32)
    assert a.limits.memory_bytes_each == DEFAULT_MEMORY_MIB << 20
    assert (b.limits.memories, b.limits.tables, b.limits.instances) == (4, 8, 40)
    assert b.limits.table_elements == 5000
    assert b.limits.memory_bytes_each == 16 << 20  # 64 MiB over the whole store
    with pytest.raises(HookConfigError, match=r"hooks\.a\.limits\.memories: expected a positive"):
        load_hook_config(
            write(tmp_path, "hooks:\n  a: {component: a.wasm, limits: {memories: 0}}\n")
        )
