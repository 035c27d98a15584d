"""What ``HookHost`` is given: which hooks a call names, its arguments, its store.

Each is checked before any hook runs and refused naming the argument and the fix; a failure
of the host's own steps during a call is named by where it happened.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _wat import assemble

import murmur_nb as mnb
from murmur_nb import ConversationStore, Message, RecordWriter
from murmur_nb._hooks.config import load_hook_config  # private: a HookHost with fast_lowering=

TWO = """\
hooks:
  summarize:
    component: hooks/guest.wasm
    capabilities: {conversation: {read: true}}
  summarize-budget:
    component: hooks/guest.wasm
    capabilities: {conversation: {read: true}}
    limits: {fuel: 5000000}
"""


@pytest.fixture(scope="module")
def guest_bytes() -> bytes:
    return assemble("guest.wat")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    with RecordWriter(home, "ctx-1") as writer:
        for i in range(250):
            writer.append("user", f"question {i}")
    return home


@pytest.fixture
def yaml_path(tmp_path: Path, guest_bytes: bytes) -> Path:
    folder = tmp_path / "capsule"
    (folder / "hooks").mkdir(parents=True)
    (folder / "hooks" / "guest.wasm").write_bytes(guest_bytes)
    path = folder / "murmur.yaml"
    path.write_text(TWO, encoding="utf-8")
    return path


@pytest.fixture
def hooks(yaml_path: Path, home: Path) -> mnb.HookHost:
    return mnb.HookHost.from_config(yaml_path, conversations=ConversationStore(home))


@pytest.fixture(params=[True, False], ids=["fast", "generic"])
def fast(request: pytest.FixtureRequest) -> bool:
    value: bool = request.param
    return value


# ------------------------------------------------------------------ hooks=


def test_a_str_names_that_one_hook_not_every_id_containing_it(hooks: mnb.HookHost) -> None:
    """``"summarize-budget"`` was matched as a substring: ``summarize`` ran too."""
    started = hooks.task_start(task_id="t", context_id="ctx-1", hooks="summarize-budget")
    assert list(started) == ["summarize-budget"] and started["summarize-budget"].ok
    kept = hooks.compact([Message("1", "user", "a")], hooks="summarize-budget")
    assert list(kept) == ["summarize-budget"]
    assert list(hooks.compact([], hooks="summarize")) == ["summarize"]
    both = hooks.compact([], hooks=("summarize-budget", "summarize"))
    assert set(both) == {"summarize", "summarize-budget"}
    assert set(hooks.compact([], hooks=hooks.hooks)) == {"summarize", "summarize-budget"}


@pytest.mark.parametrize(
    ("given", "shown"), [("summarise", "'summarise'"), (["nope"], "'nope'"),
                         (["summarize", "x", "y"], "'x', 'y'")],
)  # fmt: skip
def test_an_unknown_hook_id_is_refused_naming_the_known_ones(
    hooks: mnb.HookHost, given: str | list[str], shown: str
) -> None:
    """A misspelt id ran nothing, silently; now it is ``unknown_hook``, as in a replay."""
    for call in (
        lambda: hooks.task_start(task_id="t", context_id="ctx-1", hooks=given),
        lambda: hooks.compact([Message("1", "user", "a")], hooks=given),
    ):
        with pytest.raises(mnb.HookError) as caught:
            call()
        assert caught.value.code == "unknown_hook"
        assert str(caught.value).startswith(
            f"no hook {shown} in this HookHost; it has summarize, summarize-budget "
            "(ids from murmur.yaml's hooks:)"
        )
    assert hooks.context_id is None  # no task started
    with pytest.raises(mnb.HookError, match="did you mean 'summarize'"):
        hooks.compact([], hooks="summarise")
    with pytest.raises(mnb.HookError, match="no hook 'nope'") as caught:
        hooks.component_bytes("nope")
    assert caught.value.code == "unknown_hook"
    with pytest.raises(TypeError, match=r"hooks= takes a hook id or a list of them"):
        hooks.compact([], hooks=5)  # type: ignore[arg-type]


# ------------------------------------------------------------------ task_id, messages


@pytest.mark.parametrize(
    ("task_id", "error", "said"),
    [
        (123, TypeError, "task_id must be text (str), got 123 (int); no hook ran"),
        (None, TypeError, "task_id must be text (str), got None (NoneType); no hook ran"),
        ("t-\ud800", ValueError, "task_id holds a lone surrogate '\\ud800' at index 2"),
    ],
)
def test_a_task_id_a_hook_cannot_be_given_is_refused_before_any_hook_runs(
    hooks: mnb.HookHost, task_id: object, error: type[Exception], said: str
) -> None:
    """These were per-hook ``host_error`` rows blaming read-messages (AttributeError,
    UnicodeEncodeError from the lowering)."""
    with pytest.raises(error) as caught:
        hooks.task_start(task_id=task_id, context_id="ctx-1")  # type: ignore[arg-type]
    assert type(caught.value) is error and said in str(caught.value)
    assert hooks.context_id is None
    assert hooks.task_start(task_id="t-\u00e9", context_id="ctx-1")["summarize"].value == "t-\u00e9"


@pytest.mark.parametrize(
    ("messages", "error", "said"),
    [
        (None, TypeError, "takes a list of mnb.Message as messages, got None (NoneType)"),
        ("hello", TypeError, "takes a list of mnb.Message as messages, got 'hello' (str)"),
        (Message("1", "user", "a"), TypeError, "(one Message: pass [message])"),
        ([Message("1", "user", "a"), Message("2", "user", "bad \ud800")], ValueError,
         "messages[1].content holds '\\ud800' at index 4, a lone surrogate"),
        ([Message("1", "user", "a", name="\udfff")], ValueError, "messages[0].name holds"),
    ],
)  # fmt: skip
def test_compact_refuses_what_is_not_messages_a_hook_can_be_given(
    hooks: mnb.HookHost, messages: object, error: type[Exception], said: str
) -> None:
    with pytest.raises(error) as caught:
        hooks.compact(messages, context_id="ctx-1")  # type: ignore[arg-type]
    assert type(caught.value) is error and said in str(caught.value)
    assert "no hook ran" in str(caught.value)


class RefusingText(str):
    """Text whose UTF-8 form cannot be taken: the host fails while lowering it, outside any
    read-messages (the guest never reads here)."""

    __slots__ = ()

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        raise RuntimeError("this text refuses to be encoded")


def test_a_host_failure_outside_read_messages_names_where_it_happened(
    yaml_path: Path, home: Path, fast: bool
) -> None:
    """It said "the host's read-messages failed while serving hook ..." for any exception
    of the call, although no hook read anything."""
    config = load_hook_config(yaml_path)
    hooks = mnb.HookHost(config, conversations=ConversationStore(home), fast_lowering=fast)
    sent = [Message("1", "user", "a"), Message("2", "user", RefusingText("b"))]
    results = hooks.compact(sent, context_id="ctx-1")
    for hook_id, result in results.items():
        assert result.code == "host_error"
        assert "read-messages" not in (result.error or "")
        assert result.error == (
            f"the host failed while passing hook {hook_id!r} the arguments of on-compact, or "
            "taking its result: RuntimeError: this text refuses to be encoded"
        )
    assert hooks.compact(sent[:1], context_id="ctx-1")["summarize"].ok  # the host goes on


# ------------------------------------------------------------------ constructing the host


@pytest.mark.parametrize("as_path", [str, Path])
def test_conversations_takes_a_home_folder(
    yaml_path: Path, home: Path, as_path: type[str] | type[Path]
) -> None:
    """A home's path loaded, then every call raised ``AttributeError: 'str' object has no
    attribute 'reader'``."""
    hooks = mnb.HookHost.from_config(yaml_path, conversations=as_path(home))
    assert isinstance(hooks.conversations, ConversationStore)
    assert hooks.conversations.home == home
    result = hooks.task_start(task_id="!read", context_id="ctx-1", hooks="summarize")
    assert result["summarize"].ok and result["summarize"].value.startswith("100|250|")


def test_conversations_that_cannot_serve_reads_is_refused_at_construction(
    yaml_path: Path,
) -> None:
    with pytest.raises(TypeError, match=r"conversations= takes a ConversationStore or a murmur "
                       r"home folder, got int 42"):  # fmt: skip
        mnb.HookHost.from_config(yaml_path, conversations=42)  # type: ignore[arg-type]


def test_hookhost_given_a_path_says_to_use_from_config(yaml_path: Path) -> None:
    """It raised ``AttributeError: 'PosixPath' object has no attribute 'path'``."""
    for given in (yaml_path, str(yaml_path)):
        # the path is shown shortened (a CI's temporary folders are long): not matched whole
        with pytest.raises(TypeError, match=r"HookHost takes a loaded HookConfig, not "
                           r"(PosixPath\(|str )?'/.*; to load a murmur\.yaml use "
                           r"HookHost\.from_config\(path\)"):
            mnb.HookHost(given)  # type: ignore[arg-type]


# ------------------------------------------------------------------ the largest limits


def test_the_largest_fuel_runs_and_counts_what_it_used(
    tmp_path: Path, guest_bytes: bytes, home: Path
) -> None:
    """At the ceiling of every limit the hook loads and runs, and ``fuel_used`` is what the
    call used (a fuel past ``2**64`` wrapped: it ran out at once, or its count was absurd)."""
    folder = tmp_path / "largest"
    (folder / "hooks").mkdir(parents=True)
    (folder / "hooks" / "guest.wasm").write_bytes(guest_bytes)
    path = folder / "murmur.yaml"
    path.write_text(
        "hooks:\n  h:\n    component: hooks/guest.wasm\n    limits: {fuel: 9223372036854775807,"
        " memory_mib: 4294967296, time_ms: 2147483647, memories: 10000, tables: 10000, "
        "instances: 10000, table_elements: 4294967295, result_messages: 4294967295, "
        "result_mib: 4096}\n",
        encoding="utf-8",
    )
    hooks = mnb.HookHost.from_config(path, conversations=ConversationStore(home))
    assert hooks.hooks["h"].loaded, hooks.hooks["h"].load_error
    result = hooks.task_start(task_id="t", context_id="ctx-1")["h"]
    assert result.ok and result.value == "t"
    assert 0 < result.fuel_used < 10_000_000


# ------------------------------------------------------------------ the check-hook command


def test_check_hook_without_config_names_the_commands_flag(tmp_path: Path, guest_bytes: bytes
                                                             ) -> None:  # fmt: skip
    """It said "pass config= too", the Python argument, to a shell user."""
    component = tmp_path / "hook.wasm"
    component.write_bytes(guest_bytes)
    done = subprocess.run(
        [sys.executable, "-m", "murmur_nb._checker.cli", "check-hook", "--hook-id",
         "summarize", str(component)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "murmur-nb check-hook: --hook-id names an entry of a murmur.yaml; pass --config "
        "MURMUR_YAML too\n"
    )
    with pytest.raises(mnb.HookConfigError, match=r"hook_id= names an entry .* pass config="):
        mnb.check_hook(component, hook_id="summarize")
