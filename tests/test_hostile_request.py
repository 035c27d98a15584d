"""Issue 13, points 1-4: what a caller passes cannot reach a module in a form it misreads."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _modules import install, sh_module

import murmur_nb as mnb
from murmur_nb._modules.request import (  # private: the rule, checked against Go's table
    go_fold,
    shadowing_keys,
)
from murmur_nb.protocol import Request, Root

HOST_FIELDS = sorted(set(Request.model_fields) - {"extra"})


FACET_MODULES = [("hostile", "hostile_output")]


@pytest.fixture
def host(facet_home: Path, tmp_path: Path) -> Iterator[mnb.ModuleHost]:
    with mnb.ModuleHost(home=facet_home, runs_dir=tmp_path / "runs") as h:
        yield h


def _received(inv: mnb.Invocation) -> dict[str, Any]:
    """The request as the module read it from its standard input."""
    raw: dict[str, Any] = json.loads(inv.result["raw"])
    return raw


# key -> whether Go's encoding/json would decode it into one of the host's Request fields
FOLD_TABLE: list[tuple[str, bool]] = [
    ("roots", True),
    ("Roots", True),
    ("ROOTS", True),
    ("root\u017f", True),  # U+017F LATIN SMALL LETTER LONG S folds to s
    ("ROOT\u017f", True),
    ("Grants", True),
    ("grant\u017f", True),
    ("deadline_MS", True),
    ("Deadline_Ms", True),
    ("max_output_bytes", True),
    ("MAX_OUTPUT_BYTES", True),
    ("binarie\u017f", True),
    ("Binaries", True),
    ("\u212aey", False),  # KELVIN SIGN folds to k, but "key" is no host field
    ("input", True),
    ("INPUT", True),
    ("Request_ID", True),
    ("capab\u0131lity", False),  # U+0131 dotless i is its own orbit in Go
    ("capab\u0130lity", False),  # U+0130 dotted capital I too
    ("protocol", True),
    ("PROTOCOL", True),
    ("requestid", False),  # underscores are not folded away
    ("roots ", False),
    ("rootss", False),
    ("tool", False),
    ("extra", False),
]


@pytest.mark.parametrize(("key", "shadows"), FOLD_TABLE, ids=[k for k, _ in FOLD_TABLE])
def test_go_folding_table(key: str, shadows: bool) -> None:
    """The fold rule itself (an internal: it is what decides which keys are dropped)."""
    assert bool(shadowing_keys([key], HOST_FIELDS)) is shadows


def test_kelvin_sign_folds_like_k() -> None:
    """An internal: the two non-ASCII runes whose Go fold is an ASCII letter."""
    assert go_fold("\u212a") == go_fold("k") == go_fold("K")
    assert go_fold("\u017f") == go_fold("s") == go_fold("S")
    assert go_fold("\u0131") != go_fold("i") and go_fold("\u0130") != go_fold("i")


_GO_PROGRAM = r"""
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unicode"
)

type Request struct {
	Protocol       string          `json:"protocol"`
	Capability     string          `json:"capability"`
	RequestID      string          `json:"request_id"`
	Input          json.RawMessage `json:"input"`
	Roots          map[string]any  `json:"roots"`
	Grants         map[string]any  `json:"grants"`
	Binaries       map[string]any  `json:"binaries"`
	DeadlineMS     int             `json:"deadline_ms"`
	MaxOutputBytes int             `json:"max_output_bytes"`
}

func main() {
	var keys []string
	json.NewDecoder(os.Stdin).Decode(&keys)
	empty, _ := json.Marshal(Request{})
	for _, key := range keys {
		taken := false
		for _, value := range []any{1, "x", map[string]any{"evil": 1}} {
			b, _ := json.Marshal(map[string]any{key: value})
			var r Request
			_ = json.Unmarshal(b, &r)
			again, _ := json.Marshal(r)
			taken = taken || string(again) != string(empty)
		}
		fmt.Println(taken)
	}
	// every rune Go folds onto an ASCII letter other than that letter's own two cases
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		for c := 'a'; c <= 'z'; c++ {
			if strings.EqualFold(string(r), string(c)) {
				fmt.Printf("fold %d %c\n", r, c)
			}
		}
	}
}
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain (golang-go)")
def test_folding_matches_a_real_go_decoder(tmp_path: Path) -> None:
    """Go's own encoding/json is the reference: same verdict on every key of the table."""
    (tmp_path / "main.go").write_text(_GO_PROGRAM)
    env = {**os.environ, "GOPATH": str(tmp_path / "gp"), "GO111MODULE": "off", "GOFLAGS": ""}
    keys = [k for k, _ in FOLD_TABLE]
    out = subprocess.run(
        ["go", "run", str(tmp_path / "main.go")], input=json.dumps(keys), text=True,
        capture_output=True, env=env, check=True, timeout=600,
    ).stdout.splitlines()
    verdicts = [line == "true" for line in out[: len(keys)]]
    # "extra" is a Python-side name only: Go has no such field, and the host never drops it
    assert verdicts == [bool(shadowing_keys([k], HOST_FIELDS)) for k in keys]
    go_folds = {(int(line.split()[1]), line.split()[2]) for line in out[len(keys):]}
    letters = {go_fold(c): c for c in "abcdefghijklmnopqrstuvwxyz"}
    ours = {(cp, letters[f]) for cp in range(0x80, 0x110000) if not 0xD800 <= cp <= 0xDFFF
            and (f := go_fold(chr(cp))) in letters}
    assert go_folds == ours == {(0x17F, "s"), (0x212A, "k")}


def test_folded_extra_keys_never_reach_the_module(host: mnb.ModuleHost) -> None:
    extra = {
        "Roots": {"evil": {"path": "/", "mode": "rw"}},
        "root\u017f": {"evil2": {"path": "/", "mode": "rw"}},
        "ROOTS": {"evil3": {"path": "/", "mode": "rw"}},
        "Binaries": {"evil": "/bin/sh"},
        "Grants": {"publish": True},
        "deadline_MS": 1,
        "tool": "ffmpeg",
    }
    inv = host.invoke("hostile.echo", {}, extra=extra)
    received = _received(inv)
    assert received["tool"] == "ffmpeg"
    assert not set(received) - {*HOST_FIELDS, "tool"}
    # no key a Go decoder folds onto a host field arrived, and the host fields are the host's
    assert shadowing_keys(received, HOST_FIELDS) == sorted(set(received) & set(HOST_FIELDS))
    assert received["roots"] == {"out": inv.request.model_dump(mode="json")["roots"]["out"]}
    assert received["binaries"] == {} and received["grants"]["publish"] is False
    (warning,) = [w for w in inv.warnings if "host-owned" in w]
    for key in ("Roots", "root\u017f", "ROOTS", "Binaries", "Grants", "deadline_MS"):
        assert repr(key) in warning


def test_roots_are_canonical_when_the_runs_folder_is_a_link(
    facet_home: Path, tmp_path: Path
) -> None:
    real = tmp_path / "real-runs"
    real.mkdir()
    (tmp_path / "link-runs").symlink_to(real)
    policy = mnb.Policy(roots={"out": tmp_path / "link-out"})
    (tmp_path / "real-out").mkdir()
    (tmp_path / "link-out").symlink_to(tmp_path / "real-out")
    with mnb.ModuleHost(home=facet_home, runs_dir=tmp_path / "link-runs") as host:
        fresh = _received(host.invoke("hostile.echo", {}))["roots"]["out"]["path"]
    with mnb.ModuleHost(home=facet_home, policy=policy, runs_dir=tmp_path / "link-runs") as host:
        mapped = _received(host.invoke("hostile.echo", {}))["roots"]["out"]["path"]
    assert fresh == os.path.realpath(fresh) and fresh.startswith(str(real.resolve()) + "/")
    assert mapped == str((tmp_path / "real-out").resolve())


@pytest.mark.parametrize(
    ("bound", "value", "words"),
    [
        ("deadline_ms", 2**63, "deadline_ms=9223372036854775808 is above"),
        ("deadline_ms", 24 * 3600 * 1000 + 1, "bound of 86400000 for deadline_ms"),
        ("max_output_bytes", 2**63, "max_output_bytes=9223372036854775808 is above"),
        ("max_output_bytes", (1 << 30) + 1, "bound of 1073741824 for max_output_bytes"),
        ("deadline_ms", -5, "must be a positive integer"),
    ],
)
def test_bounds_outside_the_policy_are_refused(
    host: mnb.ModuleHost, tmp_path: Path, bound: str, value: int, words: str
) -> None:
    with pytest.raises(mnb.InvalidInput, match=words) as err:
        host.invoke("hostile.echo", {}, **{bound: value})
    assert err.value.code == "invalid_input"
    assert not list((tmp_path / "runs").glob("*/w0-out"))  # nothing ran: no root was made
    assert host.audit()["outcome"].iloc[-1] == "invalid_input"


@pytest.mark.parametrize(
    ("given", "shown"),
    [({"roots": ["media"]}, "Policy.roots must map names to paths, like {'media': "),
     ({"roots": {"media": 5}}, "got {'media': 5}"),
     ({"binaries": "ffmpeg"}, "Policy.binaries must map names to paths")],
)  # fmt: skip
def test_a_policy_root_or_binary_that_is_not_a_name_to_a_path_is_refused(
    given: dict[str, object], shown: str
) -> None:
    """``roots=["media"]`` raised dict()'s "dictionary update sequence element #0 has
    length 1; 2 is required"; ``{"media": 5}`` was taken, to fail at some later call."""
    with pytest.raises(ValueError, match=re.escape(shown)):
        mnb.Policy(**given)  # type: ignore[arg-type]


def test_a_host_over_a_file_or_with_a_dict_for_a_policy_is_refused(tmp_path: Path) -> None:
    """A file for a home was taken (every call then found no module under
    ``<file>/modules``); a dict for a policy failed at the first call with AttributeError."""
    (tmp_path / "notes.txt").write_text("not a home\n")
    with pytest.raises(ValueError, match="is a file, not a facet-studio home"):
        mnb.ModuleHost(home=tmp_path / "notes.txt")
    with pytest.raises(TypeError, match=r"policy must be an mnb.Policy, not a dict.*from_mapping"):
        mnb.ModuleHost(home=tmp_path / "home", policy={"network": ["*"]})  # type: ignore[arg-type]
    with mnb.ModuleHost(home=tmp_path / "home", policy=mnb.Policy.from_mapping({})) as host:
        assert host.modules() == []


@pytest.mark.parametrize("kind", ["read", "write"])
@pytest.mark.parametrize("made", ["missing", "file"])
def test_a_root_the_policy_maps_to_no_folder_refuses_the_call(
    tmp_path: Path, kind: str, made: str
) -> None:
    """A root mapped to a folder not made yet (or to a file) was left out of the request with
    a warning only on ``exc.invocation.warnings``: the module ran without a root it was
    promised and failed on its own line (``KeyError: 'out'``), the error telling the user to
    fix the module. The call is refused before the module starts, naming the root, the path
    and the fix; once the folder is there the same call runs."""
    home, log = tmp_path / "home", tmp_path / "log"
    log.mkdir()
    # the module touches ``ran`` in its "log" root once it has read its request
    sh_module(home, "rooted", reads=("src",) if kind == "read" else (), writes=("out", "log"),
              after='p=${line#*\\"log\\":{\\"path\\":\\"}; p=${p%%\\"*}; : > "$p/ran"')  # fmt: skip
    named = "src" if kind == "read" else "out"
    target = tmp_path / "target"
    if made == "file":
        target.write_text("a file\n")
    policy = mnb.Policy(roots={"log": log, named: target}, approved=["rooted.run"])
    with mnb.ModuleHost(home=home, policy=policy) as host:
        with pytest.raises(mnb.ModuleHostError) as caught:
            host.invoke("rooted.run")
        assert caught.value.code == "root_unavailable"
        message = str(caught.value)
        assert f"{kind} root {named!r} to {target}" in message
        assert "rooted.run was not run" in message
        assert (f"mkdir -p {target}" in message) == (made == "missing")
        assert not (log / "ran").exists()  # the module never started
        assert host.audit()["outcome"].iloc[-1] == "root_unavailable"
        if made == "file":
            target.unlink()
        target.mkdir()
        host.invoke("rooted.run")
        assert (log / "ran").exists()


def test_bounds_within_the_policy_reach_the_module(facet_home: Path) -> None:
    policy = mnb.Policy(deadline_ms_limit=90_000, max_output_bytes_limit=1 << 25)
    with mnb.ModuleHost(home=facet_home, policy=policy) as host:
        got = _received(host.invoke("hostile.echo", {}, deadline_ms=90_000,
                                    max_output_bytes=1 << 25))
        with pytest.raises(mnb.InvalidInput, match="above this host's bound of 90000"):
            host.invoke("hostile.echo", {}, deadline_ms=90_001)
    assert (got["deadline_ms"], got["max_output_bytes"]) == (90_000, 1 << 25)
    with pytest.raises(ValueError, match="above its bound"):
        mnb.Policy(deadline_ms=10, deadline_ms_limit=5)


@pytest.mark.parametrize(
    ("input_value", "extra", "words"),
    [
        ({"name": "a\udc80b"}, None, "lone surrogate"),
        ({"\ud800": 1}, None, "lone surrogate"),
        ({"x": float("nan")}, None, "not JSON-serializable"),
        ({"x": [float("inf")]}, None, "not JSON-serializable"),
        ({}, {"note": "\udfff"}, "lone surrogate"),
        ({}, {"note": float("-inf")}, "not JSON-serializable"),
    ],
)
def test_input_that_is_not_strict_json_is_refused(
    host: mnb.ModuleHost, tmp_path: Path, input_value: Any, extra: Any, words: str
) -> None:
    with pytest.raises(mnb.InvalidInput, match=words) as err:
        host.invoke("hostile.echo", input_value, extra=extra)
    assert err.value.code == "invalid_input"
    assert host.audit()["outcome"].iloc[-1] == "invalid_input"  # not host_error
    assert not list((tmp_path / "runs").glob("*/w0-out"))


def test_non_ascii_input_that_is_valid_reaches_the_module_intact(host: mnb.ModuleHost) -> None:
    text = "\u017f K é 😀 \u2028"
    assert _received(host.invoke("hostile.echo", {"t": text}))["input"] == {"t": text}


@pytest.mark.parametrize("depth", [64, 900, 200_000])
def test_deep_describe_output_refuses_that_module_only(facet_home: Path, depth: int) -> None:
    install(facet_home, "plain-one", "plain")
    deep = install(facet_home, "deep", "hostile_output")
    # depth counts the envelope itself: 1 + depth brackets in "result"
    nested = "[" * depth + "]" * depth
    envelope = json.dumps({"protocol": "modproto.v1", "module": "deep", "operation": "describe",
                           "request_id": "", "ok": True, "result": 0, "warnings": []})
    (deep / "describe.raw").write_text(envelope.replace('"result": 0', f'"result": {nested}'))
    with mnb.ModuleHost(home=facet_home) as host:
        infos = {info.id: info for info in host.modules()}
        assert infos["plain-one"].ok and infos["hostile"].ok
        (error,) = infos["deep"].errors
        assert "deeper than 64 levels" in error.detail
        with pytest.raises(mnb.InvalidDescriptor, match="deeper than 64 levels") as err:
            host.describe("deep")
        assert err.value.code == "invalid_descriptor"


@pytest.mark.parametrize(("depth", "ok"), [(63, True), (64, False), (5_000, False),
                                           (200_000, False)])
def test_deep_envelope_is_a_protocol_violation(host: mnb.ModuleHost, depth: int, ok: bool) -> None:
    if ok:
        inv = host.invoke("hostile.deep", {"depth": depth})
        assert inv.ok and json.dumps(inv.result).count("[") == depth
        return
    with pytest.raises(mnb.ProtocolViolation, match="deeper than 64 levels") as err:
        host.invoke("hostile.deep", {"depth": depth})
    assert (err.value.code, err.value.rule) == ("protocol_violation", "depth")
    assert host.audit()["outcome"].iloc[-1] == "protocol_violation"
    assert host.invoke("hostile.echo", {}).ok  # the host goes on


_GO_DECODER = r"""
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

type Root struct {
	Path string `json:"path"`
	Mode string `json:"mode"`
}

type Grants struct {
	Network       []string `json:"network"`
	Credentials   []string `json:"credentials"`
	PaidProviders []string `json:"paid_providers"`
	Publish       bool     `json:"publish"`
	Subprocess    []string `json:"subprocess"`
}

type Request struct {
	Protocol       string            `json:"protocol"`
	Capability     string            `json:"capability"`
	RequestID      string            `json:"request_id"`
	Input          json.RawMessage   `json:"input"`
	Roots          map[string]Root   `json:"roots"`
	Grants         Grants            `json:"grants"`
	Binaries       map[string]string `json:"binaries"`
	DeadlineMS     int               `json:"deadline_ms"`
	MaxOutputBytes int               `json:"max_output_bytes"`
}

func main() {
	var texts []string
	json.NewDecoder(os.Stdin).Decode(&texts)
	for _, text := range texts {
		var r Request
		if err := json.Unmarshal([]byte(text), &r); err != nil {
			fmt.Println("error:", err)
			continue
		}
		out, _ := json.Marshal(r)
		fmt.Println(string(out))
	}
}
"""

# every spelling a Go decoder takes for a host field; none of them is an exact host name
FOLDED_EXTRA: dict[str, Any] = {
    "Roots": {"evil": {"path": "/", "mode": "rw"}},
    "root\u017f": {"evil2": {"path": "/", "mode": "rw"}},
    "ROOTS": {"evil3": {"path": "/", "mode": "rw"}},
    "Binarie\u017f": {"sh": "/bin/sh"},
    "GRANTS": {"publish": True, "network": ["*"]},
    "deadline_MS": 1,
    "Max_Output_Bytes": 2,
    "Input": {"evil": True},
    "Protocol": "evil.v0",
    "Capability": "other.capability",
    "REQUEST_ID": "forged",
    "tool": "ffmpeg",
}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("go") is None, reason="needs the Go toolchain (golang-go)")
def test_no_request_serializer_emits_a_folded_host_field(tmp_path: Path) -> None:
    """The wire model itself, used without the host (a checker, a protocol user): every way
    it becomes JSON text, decoded by Go's encoding/json into the seed's types, carries
    exactly the host fields the model holds, whatever ``extra`` says."""
    roots = {"out": Root(path="/runs/r1/out", mode="rw")}
    fields: dict[str, Any] = {
        "capability": "m.c", "request_id": "r1", "input": {"a": 1}, "roots": roots,
        "binaries": {"convert": "/usr/bin/convert"}, "deadline_ms": 5000,
        "max_output_bytes": 4096,
    }
    plain = Request(**fields)
    hostile = Request(**fields, extra=FOLDED_EXTRA)
    texts = [
        plain.to_json(),
        hostile.to_json(),
        hostile.model_dump_json(),
        json.dumps(hostile.model_dump(mode="json")),
        json.dumps(hostile.model_dump()),
        Request.from_json(json.dumps({**FOLDED_EXTRA, **plain.model_dump(mode="json")})).to_json(),
    ]
    for text in texts[1:]:
        sent = json.loads(text)
        assert sent["tool"] == "ffmpeg"
        assert shadowing_keys(sent, HOST_FIELDS) == sorted(HOST_FIELDS)  # only exact names
    (tmp_path / "main.go").write_text(_GO_DECODER)
    env = {**os.environ, "GOPATH": str(tmp_path / "gp"), "GO111MODULE": "off", "GOFLAGS": ""}
    out = subprocess.run(
        ["go", "run", str(tmp_path / "main.go")], input=json.dumps(texts), text=True,
        capture_output=True, env=env, check=True, timeout=600,
    ).stdout.splitlines()
    decoded = [json.loads(line) for line in out]
    assert len(decoded) == len(texts)
    reference = decoded[0]
    assert set(reference["roots"]) == {"out"} and reference["deadline_ms"] == 5000
    assert reference["grants"]["publish"] is False
    for seen in decoded[1:]:
        assert seen == reference  # Go sees the model's own host fields, nothing folded in
