"""The pages under ``docs/`` keep the README's promises: links reach, names exist, code runs.

The README is the first screen (issue 40, item 14): what murmur-nb is, the picture, the quick
look, the two set-up commands and where to go next. What it used to hold besides (checking,
hook replay, batches, the sandbox, changes, benchmarks) lives in ``docs/*.md``, and each page
is held to what the README's code is held to (``tests/test_readme.py``):

* every relative link, of the README and of each page, reaches a file, and every ``#anchor``
  a heading of that file (as GitHub makes anchors: lower case, punctuation dropped, spaces
  to hyphens, ``-1`` for a second heading of the same text);
* the README links every page, so none is left where nobody finds it;
* every public name the text uses (``mnb.replay``, ``widgets.BatchView``, ``Policy.max_cost``,
  ``host.sandbox``, ``Policy(network_isolation=...)``) exists, in inline code and in code
  blocks alike: a renamed attribute or keyword breaks this test, not a reader's first try;
* every ``python`` block compiles, and a page's blocks run in order, as written, in a fresh
  interpreter on a temporary demo home (``-W error``), as the README's quick look does, and
  print what the page's ``<!-- prints: ... -->`` lines say (spaces not counted); a block that
  cannot run there is marked ``<!-- not run: why -->`` on the line above it and is still
  compiled and name-checked.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import murmur_nb as mnb
import murmur_nb.widgets

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
README = REPO / "README.md"
PAGES = sorted(DOCS.glob("*.md"))
#: Each page with the README, the texts whose links and names are checked.
TEXTS = [README, *PAGES]

#: The variable names the text uses for an instance, and the type each stands for.
INSTANCES: dict[str, Any] = {
    "mnb": mnb,
    "widgets": murmur_nb.widgets,
    "host": mnb.ModuleHost,
    "hooks": mnb.HookHost,
    "inv": mnb.Invocation,
    "batch": mnb.Batch,
    "rendering": mnb.Rendering,
}
NAME = re.compile(
    r"(?<![\w./])(?P<root>[A-Za-z_]\w*)(?P<path>(?:\.[A-Za-z_]\w*)*)(?P<call>(?=\((?P<args>[^()]*)))?"
)
CODE_BLOCK = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<code>.*?)^```", re.S | re.M)
NOT_RUN = "<!-- not run:"


def anchors(path: Path) -> set[str]:
    """The ``#anchors`` GitHub gives the headings of a Markdown file."""
    text = CODE_BLOCK.sub("", path.read_text())
    seen: Counter[str] = Counter()
    found = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#* *$", text, re.M):
        plain = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
        slug = re.sub(r"[^\w\- ]", "", plain).replace(" ", "-")
        found.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
        seen[slug] += 1
    return found


def relative_links(path: Path) -> list[str]:
    """Every link of a Markdown file that is not to the web, code blocks left out."""
    text = CODE_BLOCK.sub("", path.read_text())
    return re.findall(r"\]\(((?!https?:|mailto:)[^)\s]+)\)", text)


def code_blocks(path: Path, lang: str) -> list[tuple[str, bool]]:
    """Each ``lang`` block of a file, with whether it runs (no ``not run`` mark above it)."""
    text = path.read_text()
    blocks = []
    for match in CODE_BLOCK.finditer(text):
        if match.group("lang") == lang:
            above = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            blocks.append((match.group("code"), not above.startswith(NOT_RUN)))
    return blocks


def members(obj: Any) -> set[str]:
    """The attributes an object or its instances have: class members, dataclass and pydantic
    fields, annotated and slotted instance attributes."""
    names = set(dir(obj))
    if dataclasses.is_dataclass(obj):
        names |= {f.name for f in dataclasses.fields(obj)}
    names |= set(getattr(obj, "model_fields", None) or {})
    for klass in inspect.getmro(obj) if inspect.isclass(obj) else ():
        names |= set(vars(klass).get("__annotations__", {}))
        names |= set(vars(klass).get("__slots__", ()))
    return names


def keywords(obj: Any) -> set[str] | None:
    """The keyword names a call of ``obj`` takes, or None when it takes any."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    params = signature.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind is not inspect.Parameter.POSITIONAL_ONLY}


def problems_of(code: str) -> list[str]:
    """What a piece of text names that the public API does not have: each ``root.a.b`` whose
    root is a public name or one of :data:`INSTANCES`, and each keyword of a call to one."""
    problems = []
    for match in NAME.finditer(code):
        root = match.group("root")
        obj = INSTANCES.get(root)
        if obj is None and root in mnb.__all__:
            obj = getattr(mnb, root)
        if obj is None:
            continue
        spelled = root
        for part in match.group("path").split(".")[1:]:
            if part not in members(obj):
                problems.append(f"{spelled}.{part}: {spelled} has no {part!r}")
                break
            spelled, obj = f"{spelled}.{part}", getattr(obj, part, None)
            if obj is None:  # an instance attribute: its type is not followed further
                break
        else:
            if match.group("call") is not None:
                accepted = keywords(obj)
                for kw in re.findall(r"(?:^|,)\s*([A-Za-z_]\w*)=(?!=)", match.group("args")):
                    if accepted is not None and kw not in accepted:
                        problems.append(f"{spelled}({kw}=...): {spelled} takes no {kw!r}")
    return problems


def inline_code(path: Path) -> list[str]:
    return re.findall(r"`([^`\n]+)`", CODE_BLOCK.sub("", path.read_text()))


def test_there_are_docs_pages() -> None:
    names = {p.name for p in PAGES}
    assert {"architecture.md", "checking.md", "hooks.md", "batches.md", "sandbox.md",
            "changes.md", "benchmarks.md"} <= names, names  # fmt: skip


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: p.name)
def test_every_relative_link_and_anchor_exists(path: Path) -> None:
    for link in relative_links(path):
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        assert file.exists(), f"{path.name} links {link}, which does not exist"
        if anchor:
            assert file.suffix == ".md", f"{path.name} links an anchor in {link}"
            assert anchor in anchors(file), f"{path.name} links {link}: no such heading"


def test_the_readme_links_every_docs_page_and_stays_one_screen_deep() -> None:
    linked = {(REPO / link.partition("#")[0]).resolve() for link in relative_links(README)}
    for page in PAGES:
        assert page.resolve() in linked, f"the README does not link docs/{page.name}"
    lines = len(README.read_text().splitlines())
    assert lines <= 170, f"the README has {lines} lines; keep it about 150 (issue 40, item 14)"


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: p.name)
def test_every_public_name_the_text_uses_exists(path: Path) -> None:
    texts = inline_code(path) + [code for code, _ in code_blocks(path, "python")]
    problems = [problem for text in texts for problem in problems_of(text)]
    assert not problems, f"{path.name} names what murmur_nb does not have: {problems}"


def test_the_name_check_finds_a_wrong_name() -> None:
    """The check above would pass on an empty page; here it is shown to fire."""
    assert problems_of("mnb.replay(hooks, source, windows=50)") == []
    assert problems_of("host.sandbox, Policy.max_module_bytes, inv.evidence") == []
    assert problems_of("mnb.widgets.LiveRun.in_cell") == []
    assert problems_of("mnb.replay_hooks(x)") == ["mnb.replay_hooks: mnb has no 'replay_hooks'"]
    assert problems_of("host.mapp") == ["host.mapp: host has no 'mapp'"]
    assert problems_of("print(host.sandboxx)") == ["host.sandboxx: host has no 'sandboxx'"]
    assert problems_of("Policy(sandbox_mechanism=...)") == [
        "Policy(sandbox_mechanism=...): Policy takes no 'sandbox_mechanism'"
    ]
    assert anchors(README) >= {"a-quick-look", "set-up"}


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: p.name)
def test_every_python_block_compiles(path: Path) -> None:
    for number, (code, _) in enumerate(code_blocks(path, "python"), 1):
        compile(code, f"{path.name}, python block {number}", "exec")
        assert "murmur_nb._" not in code, f"{path.name} block {number} uses a private path"


@pytest.mark.slow
@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_a_pages_python_blocks_run_as_written(path: Path, tmp_path: Path) -> None:
    code = "\n".join(code for code, runs in code_blocks(path, "python") if runs)
    if not code:
        return
    env = {**os.environ, "MURMUR_NB_DEMO_HOME": str(tmp_path / "demo")}
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    expected = re.findall(r"^<!-- prints: (.+?) -->$", path.read_text(), re.M)
    assert expected, f"{path.name} runs code but says nothing of what it prints"
    printed = " ".join(done.stdout.split())
    for text in expected:
        assert " ".join(text.split()) in printed, f"{path.name} does not print {text!r}"


def test_the_changes_name_each_removal_and_what_to_write_instead() -> None:
    """Each 0.1.0 name or form that went, or goes, is listed with its replacement."""
    changes = (DOCS / "changes.md").read_text().split("## Changes since 0.1.0", 1)[1]
    changes = changes.split("\n## ")[0]
    assert "progress=True" in changes and "progress=mnb.widgets.LiveRun.in_cell" in changes
    assert "RenderError" in changes and "0.2" in changes
    assert "error_code" in changes and "ArtifactRejected" in changes
