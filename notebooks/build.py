"""Build the murmur-nb tutorial notebooks and save them with their outputs.

The notebooks are written here, cell by cell, and executed with nbclient, so they can be
regenerated whenever an API changes::

    .venv/bin/python notebooks/build.py            # every notebook
    .venv/bin/python notebooks/build.py 03 05      # only those whose name starts so

Each notebook runs top to bottom on the demo home that :func:`murmur_nb.prepare_demo_home`
lays out (``$MURMUR_NB_DEMO_HOME``, else ``~/.murmur-nb-demo``). The build points
``MURMUR_NB_DEMO_HOME`` at a fresh temporary folder unless ``--home`` names one, so building
never touches the reader's own demo home and proves the notebooks need nothing prepared.

Outputs are kept deterministic so nbval can compare them: no paths, times, durations or
addresses reach ``text/plain``; cells whose output depends on the machine (wall-clock
timings, which optional renderers are installed, image bytes of plots) carry
``# NBVAL_IGNORE_OUTPUT`` with the reason beside it. Execution timestamps and the kernel's
widget state are not saved, so a rebuild without API changes only changes widget model ids.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
IGNORE = "# NBVAL_IGNORE_OUTPUT"


def md(text: str) -> Any:
    return nbformat.v4.new_markdown_cell(text.strip("\n"))


def code(text: str, *, ignore: str | None = None) -> Any:
    """A code cell; ``ignore`` names why its output is not compared by nbval."""
    source = text.strip("\n")
    if ignore is not None:
        source = f"{IGNORE}\n# (not compared: {ignore})\n{source}"
    return nbformat.v4.new_code_cell(source)


SETUP = """
import murmur_nb as mnb

home = mnb.prepare_demo_home()  # $MURMUR_NB_DEMO_HOME, else ~/.murmur-nb-demo; idempotent
host = home.host()  # a ModuleHost over the demo modules with the demo policy
"""

# --------------------------------------------------------------------------- 01 tour

TOUR = [
    md("""
# murmur-nb in ten minutes

murmur-nb brings a capsule runtime's two extension points and its conversation history into a
Jupyter kernel:

* **modules** — external executables speaking *modproto v1* — run under a strict host;
* the **artifacts** they produce render inline, by the module's presentation hint;
* **conversation records** load into pandas through the paginated read API;
* **hook components** — WebAssembly components — run in the kernel with wasmtime.

Everything below runs on the *demo home*, a folder the package prepares with six demo
modules, a built demo hook and a conversation record of 320 messages. The first run builds
the hook component and takes a minute; after that preparing is instant.
"""),
    code(SETUP),
    md("""
## Modules

`ModuleBrowser` shows every installed module: version, capabilities and what each one does
before it runs (its *effects*), which modules need setup, and why a refused module was
refused. Pick a capability and press **Open form** for a form generated from its request
schema.
"""),
    code("""
from murmur_nb.widgets import ModuleBrowser

ModuleBrowser(host)
"""),
    md("""
Every widget is a thin view over a plain call. The browser above is `host.modules()`; a run
is `host.invoke(capability, input)`, which validates the input against the capability's
schema, builds the request, runs the module with an empty environment and re-verifies every
file it reports before anything touches it.
"""),
    code("""
thumbs = host.invoke("gallery.thumbs", {"count": 6, "palette": "ember"})
print(thumbs.ok, thumbs.result)
for artifact in thumbs.artifacts:
    print(artifact.id, artifact.media_type, artifact.bytes, artifact.digest[:19])
"""),
    md("""
`InvocationView` shows one invocation: outcome, what the module says it did, its cost
(`None` is *unknown*, never free) and the artifacts, rendered inline.
"""),
    code("""
from murmur_nb.widgets import InvocationView

InvocationView(thumbs)
"""),
    md("""
## Rendering

`mnb.render` takes an invocation, one artifact, or a list of them. The module only *names*
a primitive the host owns (here `image`, `table`, `markdown`, `json`); the host draws it,
within a size budget, and every rendering carries a plain-text summary too.
"""),
    code("""
poster = host.invoke("gallery.poster", {"title": "murmur-nb"})
mnb.render(poster)
"""),
    code("""
report = host.invoke("docs.report", {})
mnb.render([a for a in report.artifacts if a.id in {"orders-csv", "summary", "summary-json"}])
"""),
    md("""
## Approval

A capability whose cost is unknown, or that reaches a paid provider, needs the operator's
approval. The host says why before anything runs:
"""),
    code("""
host.approval_reasons("oracle.critique")
"""),
    md("""
`CapabilityForm` is generated from the capability's request schema. Running it asks for the
approval first: the panel lists the reasons, and **Approve** runs the call (try it).
"""),
    code("""
from murmur_nb.widgets import CapabilityForm

picture = host.stage(thumbs.artifacts[0])  # hand one thumbnail to the oracle (see 02)
form = CapabilityForm(host, "oracle.critique", values={"image": picture.ref()}, staged=[picture])
form.run()  # the cost is unknown, so this opens the approval panel instead of running
form
"""),
    md("""
## Conversations as DataFrames

The conversation record is read through the same cursor-paginated API a hook uses, newest
page first, and comes back oldest first as a DataFrame. Tool results keep their envelope
fields as columns.
"""),
    code("""
df = mnb.read_conversation(home.context_id, home.murmur_home, progress=False)
df[["position", "id", "role", "name", "created_at", "tool_call_id", "is_error"]].tail(6)
"""),
    code("""
tools = df[df["role"] == "tool"]
tools.groupby("name", observed=True)["is_error"].mean().round(3).sort_values(ascending=False)
"""),
    code("""
from murmur_nb.widgets import ConversationExplorer

store = mnb.ConversationStore(home.murmur_home)
ConversationExplorer(store, home.context_id)
"""),
    md("""
## A hook

`murmur.yaml` names two hooks on one component. Only `summarize` is granted
`conversation.read`; `peek` still links and runs, and every read it makes is `not-granted`.
"""),
    code("""
print(home.murmur_yaml.read_text())
"""),
    code("""
from murmur_nb.widgets import HookConsole

hooks = mnb.HookHost.from_config(home.murmur_yaml, conversations=store)
console = HookConsole(hooks, store, task_id="tour")
console.fire_task_start()
console
"""),
    md("""
## The audit

Every invocation, refused ones included, is one row of `host.audit()`.
"""),
    code("""
host.audit()[["capability", "outcome", "ok", "approval", "estimated_cost", "actual_cost"]]
"""),
    md("""
Next: [hosting modules](02-hosting-modules.ipynb) ·
[hook components](03-hook-components.ipynb) ·
[conversations to DataFrames](04-conversations-to-dataframes.ipynb) ·
[the render gallery](05-render-gallery.ipynb)
"""),
]

# --------------------------------------------------------------------------- 02 modules

ROGUE = r"""
import hashlib, json, os, subprocess, sys, time
from pathlib import Path

CAPS = {
    "env": "Report what the process was given",
    "hang": "Start a grandchild in its own session, then never answer",
    "flood": "Print far more than any envelope needs",
    "liar": "Answer with another request id",
    "escape": "Claim a file outside its root",
}
DESCRIPTOR = {
    "module": "rogue", "name": "Rogue", "version": "0.0.1",
    "protocol_versions": ["modproto.v1"],
    "capabilities": [
        {"id": f"rogue.{name}", "title": name, "summary": summary,
         "request_schema": "empty", "result_schema": "any", "artifact_schemas": ["note"],
         "effects": {"local": True, "cost_known": True}, "skills": [], "long_running": False}
        for name, summary in CAPS.items()
    ],
    "request_schemas": {"empty": {"type": "object", "additionalProperties": False}},
    "result_schemas": {"any": {}}, "artifact_schemas": {"note": {}},
    "agent_overlays": [], "skills": [], "requirements": [],
    "permissions": {"filesystem_write": ["out"]},
}
FREE = {"local": True, "estimated_cost": 0, "actual_cost": 0, "artifacts": []}


def answer(request_id, operation, result, execution=FREE):
    print(json.dumps({"protocol": "modproto.v1", "module": "rogue", "operation": operation,
                      "request_id": request_id, "ok": True, "result": result,
                      "warnings": [], "execution": execution}))


if sys.argv[1] == "describe":
    answer("", "describe", DESCRIPTOR)
    sys.exit(0)
request = json.loads(sys.stdin.read())
name, rid = request["capability"].split(".", 1)[1], request["request_id"]
if name == "env":
    answer(rid, "invoke", {"environment": dict(os.environ), "working_folder": os.listdir(".")})
elif name == "hang":
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"],
                     start_new_session=True)
    time.sleep(3600)
elif name == "flood":
    sys.stdout.write("x" * (8 << 20))
elif name == "liar":
    answer("0" * 32, "invoke", {"said": "hello"})
elif name == "escape":
    out = Path(request["roots"]["out"]["path"])
    data = b"a file inside the root\n"
    (out / "note.txt").write_bytes(data)
    note = {"id": "note", "kind": "note", "path": "note.txt", "root": "out",
            "media_type": "text/plain", "bytes": len(data),
            "digest": "sha256:" + hashlib.sha256(data).hexdigest()}
    passwd = dict(note, id="passwd", path="../../../../etc/passwd")
    answer(rid, "invoke", {}, dict(FREE, artifacts=[note, passwd]))
"""

MODULES = [
    md("""
# Hosting modules

A *module* is an executable file `modules/<id>/module` that speaks modproto v1: `module
describe` prints its descriptor, `module invoke` reads one request on standard input and
prints one envelope. The host trusts nothing it says: this notebook walks through what
`ModuleHost` checks and decides, on the demo modules and on one module that misbehaves on
purpose.
"""),
    code(SETUP),
    md("""
## Describe

`host.modules()` lists every module folder, refused ones included; `host.describe(id)`
re-runs `describe` and returns the validated descriptor.
"""),
    code("""
for info in host.modules():
    caps = ", ".join(c.id for c in info.descriptor.capabilities) if info.ok else "refused"
    print(f"{info.id:<11} ok={info.ok!s:<5} needs_setup={info.needs_setup!s:<5} {caps}")
"""),
    code("""
gallery = host.describe("gallery")
print(gallery.name, gallery.version, gallery.protocol_versions)
thumbs_cap = gallery.capability("gallery.thumbs")
print(thumbs_cap.summary)
print(thumbs_cap.effects)
gallery.request_schemas[thumbs_cap.request_schema]
"""),
    md("""
`transcribe` is accepted but *needs setup*: its descriptor lists requirements it could not
find, each with a detail that says how to satisfy it. The host refuses to invoke it until
they are met.
"""),
    code("""
transcribe = next(info for info in host.modules() if info.id == "transcribe")
for line in transcribe.setup_instructions:
    print(line.replace(str(host.home), "$FACET_STUDIO_HOME"))
"""),
    md("""
## Policy

What a module *declares* (`permissions`) is a request, never a grant. The host intersects
it with its `Policy` on every call: roots, grants, binaries. The demo policy maps the
persistent `jobs` root, allows the `ffmpeg` subprocess and the `demo-oracle` provider.
"""),
    code("""
studio = host.describe("studio")
print("declares:", studio.permissions.subprocess, studio.permissions.filesystem_write)
print("granted: ", host.policy.grants_for(studio))
strict = mnb.Policy()  # the default allows nothing
print("strict:  ", strict.grants_for(studio))
"""),
    md("""
Inputs are validated against the capability's request schema **before** anything runs.
"""),
    code("""
try:
    host.invoke("gallery.thumbs", {"count": 99})
except mnb.InvalidInput as exc:
    print(exc.code, "-", exc.message)
"""),
    md("""
## Approval

Default policy: a capability whose cost is unknown, or that declares paid providers,
publishing, credentials or external writes, needs the operator's approval. Without it the
call is refused with the reasons, and nothing runs.
"""),
    code("""
for reason in host.approval_reasons("oracle.critique"):
    print("-", reason)
"""),
    code("""
thumbs = host.invoke("gallery.thumbs", {"count": 3})
staged = host.stage(thumbs.artifacts[0])
try:
    host.invoke("oracle.critique", {"image": staged.ref()}, staged=[staged])
except mnb.ApprovalRequired as exc:
    print(exc.code)
"""),
    md("""
`host.approve(capability)` records the operator's approval. The approval is **pinned** to
the SHA-256 of the descriptor the operator saw.
"""),
    code("""
pinned = host.approve("oracle.critique")
print("pinned to", pinned[:19])
critique = host.invoke("oracle.critique", {"image": staged.ref()}, staged=[staged])
print(critique.ok, critique.result)
print("estimated cost:", critique.estimated_cost, "actual cost:", critique.actual_cost)
"""),
    md("""
The cost of the oracle is `None`: **unknown**, which is never shown as free (`0` is free).

## Descriptor pinning

Suppose the module is upgraded behind the operator's back. `describe` now returns another
descriptor, so the standing approval no longer counts, and the reasons say what changed.
"""),
    code("""
main_py = home.module_dir("oracle") / "main.py"
original = main_py.read_text()
main_py.write_text(original.replace('"demo-oracle"', '"demo-oracle-premium"'))
for reason in host.approval_reasons("oracle.critique"):
    print("-", reason)
"""),
    md("""
`prepare_demo_home` repairs any demo file whose bytes changed, so the module is back to the
descriptor the approval was pinned to, and the approval counts again.
"""),
    code("""
mnb.prepare_demo_home(home.path)
host.approval_reasons("oracle.critique")
"""),
    md("""
## Artifacts

A module reports files by root name and relative path, with size and digest. Before
touching one the host re-validates it: root supplied to *this* call, path inside it with
links followed, a regular file, size and SHA-256 as claimed. What passes is a
`VerifiedArtifact`; its `file` is where it really is.
"""),
    code("""
for a in thumbs.artifacts:
    print(a.id, a.root, a.path, a.media_type, a.bytes, a.digest[:19], a.file.is_file())
"""),
    md("""
## Staging: handing an artifact to another module

Root names belong to one invocation, so a module can never name another module's file.
The host *stages* the artifact into its own content-addressed store and supplies that store
to the consumer as the read-only root `staged`.
"""),
    code("""
print(staged.ref())
review = host.invoke("critic.review", {"image": staged.ref()}, staged=[staged])
print(review.ok, review.result)
"""),
    md("""
The staged file is re-hashed before each use, so a mutation is detected, not trusted.
"""),
    code("""
picture = staged.file.read_bytes()
staged.file.chmod(0o644)
staged.file.write_bytes(picture[:64] + bytes(len(picture) - 64))  # same size, other bytes
try:
    host.invoke("critic.review", {"image": staged.ref()}, staged=[staged])
except mnb.DigestMismatch as exc:
    print(exc.code)
staged = host.stage(thumbs.artifacts[0])  # staging again restores the verified copy
print(host.invoke("critic.review", {"image": staged.ref()}, staged=[staged]).ok)
"""),
    md("""
## The audit DataFrame

Every invocation — refused, failed, approved — is one row.
"""),
    code("""
audit = host.audit()
audit[["module", "capability", "approval", "outcome", "ok", "estimated_cost", "actual_cost"]]
"""),
    code("""
audit.groupby("outcome").size()
"""),
    md("""
## What a misbehaving module gets

`rogue` is a module written to break the rules. It gets its own facet-studio home (so the
demo home stays clean) and the default policy, which allows nothing.
"""),
    code("""
import sys
import tempfile
from pathlib import Path

rogue_home = Path(tempfile.mkdtemp(prefix="rogue-home-"))
folder = rogue_home / "modules" / "rogue"
folder.mkdir(parents=True)
(folder / "module").write_text(f"#!{sys.executable} -I\\n" + ROGUE_SOURCE)
(folder / "module").chmod(0o755)
rogue = mnb.ModuleHost(home=rogue_home)
[c.id for c in rogue.describe("rogue").capabilities]
"""),
    md("""
It runs with an **empty environment** (Python itself sets `LC_CTYPE`) and an empty private
working folder:
"""),
    code("""
rogue.invoke("rogue.env").result
"""),
    md("""
At its deadline the **whole process tree** is killed, the grandchild that started its own
session included:
"""),
    code("""
try:
    rogue.invoke("rogue.hang", deadline_ms=1500)
except mnb.DeadlineExceeded as exc:
    print(exc.code, "-", exc.message)
"""),
    md("""
Standard output past `max_output_bytes` is cut and the tree is killed; host memory stays
bounded whatever the module prints:
"""),
    code("""
try:
    rogue.invoke("rogue.flood", max_output_bytes=64 * 1024)
except mnb.OutputTooLarge as exc:
    print(exc.code, "-", exc.message)
"""),
    md("""
An envelope that breaks a rule is discarded as a protocol violation naming the rule:
"""),
    code("""
try:
    rogue.invoke("rogue.liar")
except mnb.ProtocolViolation as exc:
    print(exc.code, "- rule:", exc.rule)
"""),
    md("""
An artifact outside its root is rejected — never rendered, never staged — while the valid
one next to it is kept:
"""),
    code("""
escape = rogue.invoke("rogue.escape")
print("verified:", [a.id for a in escape.artifacts])
for r in escape.rejected_artifacts:
    print("rejected:", r.id, r.code, "-", r.message)
"""),
    code("""
rogue.audit()[["capability", "outcome", "ok", "rejected_artifacts"]]
"""),
    code("""
import shutil

rogue.close()
host.close()
shutil.rmtree(rogue_home)
"""),
]

# --------------------------------------------------------------------------- 03 hooks

CENSUS_HOOK = '''
"""A hook that reads the conversation: failed tool calls per tool.

on-compact misbehaves on purpose, as the first message asks: "spin" loops forever,
"hoard" allocates until memory runs out. It shows what a hook's limits do.
"""
import json

from wit_world import exports
from wit_world.imports import lifecycle, read


class Handlers(exports.Handlers):
    def on_task_start(self, event: lifecycle.TaskStartEvent) -> str:
        failed: dict[str, int] = {}
        calls = 0
        cursor = None
        while True:  # next-cursor none is the only correct end of a walk
            page = read.read_messages(cursor, 100)
            for message in page.messages:
                if message.role == "tool":
                    calls += 1
                    envelope = json.loads(message.content)
                    if envelope["is_error"]:
                        tool = message.name or "?"
                        failed[tool] = failed.get(tool, 0) + 1
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        worst = sorted(failed.items(), key=lambda kv: (-kv[1], kv[0]))
        listed = ", ".join(f"{tool} {n}" for tool, n in worst)
        return f"{sum(failed.values())} of {calls} tool calls failed: {listed}"

    def on_compact(self, messages: list[lifecycle.Message]) -> list[lifecycle.Message]:
        mode = messages[0].content if messages else ""
        if mode == "spin":
            n = 0
            while True:
                n += 1
        if mode == "hoard":
            hoard = []
            while True:
                hoard.append(bytearray(1 << 20))
        return messages
'''

HOOKS = [
    md("""
# Hook components

A hook is a WebAssembly component exporting `murmur:hook/handlers@0.8.0`. The host gives it
exactly one capability, `murmur:conversation/read@0.1.0` — no files, no environment, no
network — and only a hook whose entry in the operator's `murmur.yaml` says
`capabilities.conversation.read: true` may actually read.
"""),
    code(SETUP),
    md("""
## murmur.yaml

The demo capsule's configuration: two hooks on one component (the demo `summarize` hook,
written in Python and built with componentize-py when the demo home was prepared).
"""),
    code("""
print(home.murmur_yaml.read_text())
"""),
    code("""
store = mnb.ConversationStore(home.murmur_home)
hooks = mnb.HookHost.from_config(home.murmur_yaml, conversations=store)
for hook_id, info in hooks.hooks.items():
    print(hook_id, info.component.name, info.events, "read granted:", info.read_granted,
          "loaded:", info.loaded)
"""),
    md("""
## With and without the read grant

On `task-start` the host scopes reads to the record the task's `context-id` names, then
calls each hook. `summarize` walks the record page by page; `peek` runs the same code and
gets `not-granted` on its first read.
"""),
    code("""
results = hooks.task_start(task_id="t1", context_id=home.context_id)
for hook_id, result in results.items():
    print(hook_id, "ok" if result.ok else result.code)
    print("  value: ", result.value)
    print("  error: ", result.error)
    print("  stdout:", result.stdout.strip())
    print("  stderr:", result.stderr.strip())
"""),
    md("""
`on-compact` gets messages and returns the ones to keep. The demo hook keeps the system
prompt and the newest turns and folds the rest into one summary message.
"""),
    code("""
recent = store.reader(home.context_id).read_messages(None, 30).messages[::-1]
kept = hooks.compact(recent)["summarize"].value
print(len(recent), "->", len(kept))
for message in kept[:3]:
    print(message.role, message.name, message.content[:90])
"""),
    md("""
`HookConsole` does the same from buttons: pick a context, fire `task-start` or `compact`,
and see each `HookResult` with its stdout, stderr, time and fuel.
"""),
    code("""
from murmur_nb.widgets import HookConsole

console = HookConsole(hooks, store, task_id="t1")
console.fire_task_start()
console
"""),
    md("""
## A Python hook of our own

A hook is a Python module with a `Handlers` class; `build_python_hook` turns it into a
component with componentize-py (cached by the digest of the source and the WIT, so this is
slow only the first time). This one reads the whole conversation and counts failed tool
calls per tool; its `on-compact` misbehaves on request.
"""),
    code("""
hook_dir = home.path / "tutorial-hooks"
hook_dir.mkdir(exist_ok=True)
(hook_dir / "census.py").write_text(CENSUS_SOURCE)
component = mnb.build_python_hook(hook_dir / "census.py",
                                  output=home.murmur_home / "hooks" / "census.wasm")
print(component.name, component.read_bytes()[:4])
"""),
    md("""
Four entries for the same component: `census` reads the conversation on `task-start` with
the default limits; three more run its `on-compact` under a 300 ms time limit, a fuel limit
(roughly: wasm instructions per call) and 64 MiB of memory.
"""),
    code("""
tutorial_yaml = home.murmur_home / "tutorial.yaml"
tutorial_yaml.write_text('''\\
inference:
  transport: api
hooks:
  census:
    component: hooks/census.wasm
    events: [task-start]
    capabilities:
      conversation:
        read: true
  census-timed:
    component: hooks/census.wasm
    events: [compact]
    limits: {time_ms: 300}
  census-fueled:
    component: hooks/census.wasm
    events: [compact]
    limits: {fuel: 50000000, time_ms: 20000}
  census-small:
    component: hooks/census.wasm
    events: [compact]
    limits: {memory_mib: 64, time_ms: 2000}
''')
tutorial = mnb.HookHost.from_config(tutorial_yaml, conversations=store)
result = tutorial.task_start(task_id="t2", context_id=home.context_id)["census"]
print(result.ok, result.value)
"""),
    md("""
## What limits do to a runaway hook

`spin` loops forever: the time limit stops it (the host advances wasmtime's epoch past the
call's deadline) and the fuel limit stops it after a fixed amount of work. `hoard` grows
memory until `memory.grow` fails and the guest traps. Each is stopped and reported; the
kernel, the host and the other hooks go on.
"""),
    code("""
spin = [mnb.Message(id="m1", role="user", content="spin")]
for hook_id, result in tutorial.compact(spin).items():
    print(f"{hook_id}: {result.code} - {result.error}")
"""),
    code("""
hoard = [mnb.Message(id="m1", role="user", content="hoard")]
small = tutorial.compact(hoard)["census-small"]
print(small.code, "-", small.error)
"""),
    code("""
fueled = tutorial.compact(spin)["census-fueled"]
print("fuel used:", fueled.fuel_used, "of", tutorial.hooks["census-fueled"].limits.fuel)
print(tutorial.task_start(task_id="t3", context_id=home.context_id)["census"].value)
"""),
    md("""
Durations are real wall time, so they differ on every run:
"""),
    code(
        """
for hook_id, result in tutorial.compact(spin).items():
    print(f"{hook_id:<14} {result.code or 'ok':<18} {result.duration_ms:8.1f} ms")
""",
        ignore="wall-clock durations",
    ),
    code("""
tutorial.close()
hooks.close()
tutorial_yaml.unlink()
"""),
]

# --------------------------------------------------------------------------- 04 frames

FRAMES = [
    md("""
# Conversations to DataFrames

The runtime appends one JSON object per line to `conversations/<context-id>.jsonl`. murmur-nb
reads it through the same cursor-paginated API a hook gets (`read-messages`), and turns a
walk of it into a DataFrame.
"""),
    code(
        SETUP
        + """
import json

import matplotlib.pyplot as plt
""",
        ignore="a fresh matplotlib may print that it builds its font cache",
    ),
    md("""
## The walk

Pages come newest first. `next_cursor` is opaque; pass it back unmodified to get the next
(older) page. A walk ends when `next_cursor` is `None` — the only correct end, since `total`
is a snapshot and the runtime may append while you page.
"""),
    code("""
store = mnb.ConversationStore(home.murmur_home)
reader = store.reader(home.context_id)
page = reader.read_messages(None, 5)
print("total:", page.total, "| more:", page.next_cursor is not None)
for message in page.messages:
    print(message.id, message.role, message.content[:70])
"""),
    code("""
sizes, cursor = [], None
while True:
    page = reader.read_messages(cursor, 100)
    sizes.append(len(page.messages))
    if page.next_cursor is None:
        break
    cursor = page.next_cursor
print("pages:", sizes, "messages:", sum(sizes))
"""),
    md("""
A cursor that was altered is refused, not guessed at:
"""),
    code("""
first = reader.read_messages(None, 10)
try:
    reader.read_messages(first.next_cursor[:-2] + "xx", 10)
except mnb.ConversationReadError as exc:
    print(exc.code)
"""),
    md("""
## `read_conversation`

One call does the walk and builds typed columns, oldest message first.
"""),
    code("""
df = mnb.read_conversation(home.context_id, store, progress=False)
df.dtypes
"""),
    code("""
df[["position", "id", "role", "name", "created_at"]].head(8)
"""),
    md("""
## Tool-envelope columns

A tool result reaches a reader as an envelope: `content` is the compact JSON of
`{"__murmur_tool_msg__": true, "tool_call_id", "is_error", "body"}`. The frame unpacks it
into the columns `tool_call_id`, `is_error` and `body` (the decoded result, any JSON value).
"""),
    code("""
tool_row = df[df["role"] == "tool"].iloc[0]
print(tool_row["content"])
print(json.loads(tool_row["content"]).keys())
print(tool_row["tool_call_id"], tool_row["is_error"], type(tool_row["body"]).__name__)
"""),
    code("""
tools = df[df["role"] == "tool"].copy()
tools[["id", "name", "tool_call_id", "is_error", "body"]].head(6)
"""),
    md("""
## Messages per role over time
"""),
    code("""
per_day = (
    df.assign(day=df["created_at"].dt.strftime("%Y-%m-%d"))
    .pivot_table(index="day", columns="role", values="id", aggfunc="count", observed=True)
    .fillna(0)
    .astype(int)
)
per_day
"""),
    code(
        """
ax = per_day.plot.bar(stacked=True, figsize=(7, 3.5), rot=0, title="Messages per role per day")
ax.set_ylabel("messages")
plt.show()
""",
        ignore="PNG bytes depend on the matplotlib build and fonts",
    ),
    md("""
## Tool error rate
"""),
    code("""
rates = (
    tools.groupby("name", observed=True)["is_error"]
    .agg(calls="count", failed="sum")
    .assign(error_rate=lambda t: (t["failed"] / t["calls"]).round(3))
    .sort_values("error_rate", ascending=False)
)
print(f"overall: {tools['is_error'].mean():.3f} of {len(tools)} tool calls failed")
rates
"""),
    code(
        """
ax = rates["error_rate"].plot.barh(figsize=(6, 3), title="Tool error rate")
ax.invert_yaxis()
ax.set_xlabel("share of calls that failed")
plt.show()
""",
        ignore="PNG bytes depend on the matplotlib build and fonts",
    ),
    md("""
Which errors, by code (the body of a failed call is `{"error": code, "message": ...}`):
"""),
    code("""
failed = tools[tools["is_error"].fillna(False)]
failed["body"].map(lambda b: b["error"]).value_counts()
"""),
    md("""
## Longest tool bodies
"""),
    code("""
tools["body_chars"] = tools["body"].map(lambda b: len(json.dumps(b)))
longest = tools.nlargest(8, "body_chars")[["id", "name", "tool_call_id", "body_chars"]]
longest
"""),
    code(
        """
ax = longest.set_index("tool_call_id")["body_chars"].plot.barh(
    figsize=(6, 3), title="Longest tool result bodies (characters of JSON)"
)
ax.invert_yaxis()
plt.show()
""",
        ignore="PNG bytes depend on the matplotlib build and fonts",
    ),
    md("""
## Browsing

`ConversationExplorer` pages through the same API: newest first, **Older** / **Newer**, a role
filter, tool envelopes expanded, the live total and a **to DataFrame** button.
"""),
    code("""
from murmur_nb.widgets import ConversationExplorer

explorer = ConversationExplorer(store, home.context_id)
explorer.role_filter.value = "tool"
explorer
"""),
    md("""
## Many records at once

`read_conversations` loads every record of a murmur home with a leading `context_id` column;
with `engine="dask"` it is lazy, one partition per record.
"""),
    code("""
everything = mnb.read_conversations(home.murmur_home, progress=False)
everything.groupby("context_id").size()
"""),
]

# --------------------------------------------------------------------------- 05 gallery

GALLERY = [
    md("""
# The render gallery

A module never ships view code. It may name one of thirteen presentation primitives the host
owns — or none, and the media type decides. This notebook produces every primitive with the
demo modules and renders each with `mnb.render`. Every rendering carries a `text/plain`
summary, so a saved notebook stays readable anywhere.
"""),
    code(SETUP),
    code("""
sorted(mnb.PRIMITIVES)
"""),
    md("""
Run every demo capability that produces files. `studio.storyboard` is long-running: it
returns a job, and `studio.storyboard_status` is polled until it is done.
"""),
    code("""
thumbs = host.invoke("gallery.thumbs", {"count": 6})
poster = host.invoke("gallery.poster", {"title": "murmur-nb"})
diagram = host.invoke("gallery.diagram", {})
tone = host.invoke("studio.tone", {})
clip = host.invoke("studio.clip", {"seconds": 2})
report = host.invoke("docs.report", {})
job = host.invoke("studio.storyboard", {})
polls = 0
while True:
    polls += 1
    storyboard = host.invoke("studio.storyboard_status", {"job": job.result["job"]})
    if storyboard.result["state"] == "done":
        break
print("storyboard done after", polls, "polls")

by_primitive = {}
for inv in (thumbs, poster, diagram, tone, clip, report, storyboard):
    for artifact in inv.artifacts:
        primitive = mnb.resolve_presentation(artifact.presentation, artifact.media_type)
        by_primitive.setdefault(primitive, []).append(artifact)
print(sorted(by_primitive) == sorted(mnb.PRIMITIVES))
{p: [a.id for a in arts] for p, arts in sorted(by_primitive.items())}
"""),
    md("## `video`"),
    code("mnb.render(by_primitive['video'][0])"),
    md("## `audio`"),
    code("mnb.render(by_primitive['audio'][0])"),
    md("## `image`"),
    code("mnb.render(by_primitive['image'][0])"),
    md("""
## `image_grid`

The images of one execution that carry `image_grid` render together, in order.
"""),
    code("mnb.render(thumbs)"),
    md("""
## `timeline`

JSON events with `start`, optional `end`, `label` and `lane`.
"""),
    code("mnb.render(by_primitive['timeline'][0])"),
    md("""
## `slides`

Markdown split on `---` lines (a PDF or a list of images works too).
"""),
    code("mnb.render(by_primitive['slides'][0])"),
    md("## `document`"),
    code("mnb.render(by_primitive['document'][0])"),
    md("""
## `diagram`

SVG is drawn as is; Mermaid and Graphviz sources are drawn when `mmdc` / `dot` are on
`PATH`, and shown as source otherwise — so this output depends on the machine.
"""),
    code("mnb.render(diagram)", ignore="depends on whether Graphviz and mermaid-cli are installed"),
    code("""
[mnb.resolve_presentation(a.presentation, a.media_type) for a in diagram.artifacts]
"""),
    md("""
## `table`

CSV, TSV and Parquet, with the first and last rows of long tables.
"""),
    code("mnb.render(by_primitive['table'])"),
    md("## `markdown`"),
    code("mnb.render(by_primitive['markdown'][0])"),
    md("## `text`"),
    code("mnb.render(by_primitive['text'][0])"),
    md("## `json`"),
    code("mnb.render(by_primitive['json'][0])"),
    md("""
## `download`

Anything else is offered as a download (embedded when it fits the budget, linked otherwise).
"""),
    code("mnb.render(by_primitive['download'][0])"),
    md("""
## Budgets

`RenderBudget` decides from the declared size, before a file is opened, whether it is
embedded or linked.
"""),
    code("""
small = mnb.RenderBudget(embed_bytes=1024)
print(mnb.render(by_primitive['audio'][0], budget=small).text)
"""),
    code("""
host.close()
"""),
]

NOTEBOOKS: dict[str, list[Any]] = {
    "01-tour": TOUR,
    "02-hosting-modules": MODULES,
    "03-hook-components": HOOKS,
    "04-conversations-to-dataframes": FRAMES,
    "05-render-gallery": GALLERY,
}

# Sources a notebook defines for itself (shown in full in a cell of its own).
PRELUDES: dict[str, list[Any]] = {
    "02-hosting-modules": [
        md("The misbehaving module used at the end, a single Python file:"),
        code(f"ROGUE_SOURCE = r'''{ROGUE}'''"),
    ],
    "03-hook-components": [
        md("The source of the Python hook built below:"),
        code(f"CENSUS_SOURCE = '''{CENSUS_HOOK}'''"),
    ],
}


def assemble(name: str) -> Any:
    cells = list(NOTEBOOKS[name])
    prelude = PRELUDES.get(name, [])
    if prelude:
        cells[2:2] = prelude  # after the introduction and the set-up cell
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata = {
        "kernelspec": {
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
            "name": "python3",
        },
        "language_info": {"name": "python"},
    }
    return nb


def _scrub(nb: Any) -> None:
    """Drop what changes on every run without meaning anything: timings and ids."""
    nb.metadata.pop("widgets", None)
    nb.metadata["language_info"] = {"name": "python"}
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{i:04d}"
        cell.metadata.pop("execution", None)


def build(name: str) -> Path:
    nb = assemble(name)
    client = NotebookClient(
        nb,
        timeout=900,
        kernel_name="python3",
        resources={"metadata": {"path": str(HERE)}},
        store_widget_state=False,
    )
    client.execute()
    _scrub(nb)
    target = HERE / f"{name}.ipynb"
    nbformat.validate(nb)
    nbformat.write(nb, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="build only notebooks whose name starts so")
    parser.add_argument("--home", help="demo home to use (default: a fresh temporary folder)")
    args = parser.parse_args(argv)
    names = [n for n in NOTEBOOKS if not args.only or any(n.startswith(o) for o in args.only)]
    with tempfile.TemporaryDirectory(prefix="murmur-nb-build-") as tmp:
        os.environ["MURMUR_NB_DEMO_HOME"] = args.home or str(Path(tmp) / "demo")
        for name in names:
            t0 = time.perf_counter()
            target = build(name)
            size = target.stat().st_size
            print(f"{target.name}: {size / 1e6:.2f} MB in {time.perf_counter() - t0:.0f} s")
            if size >= 5_000_000:
                print(f"{target.name} is {size} bytes; a tutorial must stay under 5 MB")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
