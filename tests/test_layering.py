"""The package's imports tell the truth: layers point down, no cycles, no hidden imports.

Each unit is a subpackage or top-level module of ``murmur_nb``; :data:`LAYERS` lists them
from the top down. What this file checks, all read from the source with :mod:`ast`:

* **Layers point down.** A unit may import its own modules and any unit of a *lower* layer,
  never one of its own layer or above. Every import counts, also one inside a function or
  under ``if TYPE_CHECKING:`` (a lazy back-import is still a back-arrow), and so does a
  string import (below).
* **No import cycle**, neither between units nor between the modules of one package (the
  modules of a unit import each other in one direction too): a lazy or type-only import
  that closes a cycle only hides it. :data:`ALLOWED_CYCLES` lists the cycles being removed
  right now.
* **The package imports its own modules with import statements**, never by a string
  (``importlib.import_module("murmur_nb...")``, ``__import__``, ``sys.modules["murmur_nb..."]``),
  which no reader and no checker sees; :data:`ALLOWED_STRING_IMPORTS` lists the exceptions.
  Each string import is still counted as an import by the two checks above.
* **Tests reach a private module only by importing it**, with ``# private: <why>`` on the
  import, never by an attribute path (``mnb._hooks.config``) or a patch target string
  (``"murmur_nb._hooks.host.check_imports"``); :data:`ALLOWED_PRIVATE_PATHS` lists the
  exceptions.
* No folder holds more than about 15 modules.

Each rule is shown to fire on a small planted tree in ``tmp_path``. See docs/architecture.md.
"""

from __future__ import annotations

import ast
import graphlib
import itertools
import shutil
from collections.abc import Collection, Iterable
from pathlib import Path

import murmur_nb

PACKAGE = Path(murmur_nb.__file__).parent

#: From the top down; units of one layer do not import each other.
LAYERS: list[set[str]] = [
    {"__init__", "__main__", "_pytest_plugin"},  # the public namespace; python -m; the plugin
    {"_demo"},  # the demo home: modules, hooks and a conversation to try things on
    {"widgets"},  # the only users of ipywidgets
    {"_checker"},  # the module checker and the murmur-nb command line
    {"_batch"},  # ModuleHost.map's batch: a driver above the host, on its public API
    {"_modules"},  # the host pipeline: ModuleHost.invoke
    {"_knowledge"},  # skills and overlays (rendered as cards)
    {"_replay"},  # replaying hooks over records: a driver above the hook host
    {"_hooks", "_render"},  # wasm hooks; artifact rendering
    {"_conversations", "_sandbox", "_forms"},  # records; the OS sandbox; the headless form
    {"_schemas"},  # bounded JSON Schema checks, the describe descriptor
    {"_files"},  # beneath a folder: open, fstat, hash; artifact claims re-checked
    {"_exceptions"},  # the one error tree
    {"protocol", "_rules", "_progress"},  # wire vocabulary; rules and progress policy, no deps
]
LAYER_OF = {unit: depth for depth, units in enumerate(LAYERS) for unit in units}
MAX_MODULES_PER_FOLDER = 15

#: Module cycles being removed right now, each the set of modules that import each other
#: today. A cycle passes only while all of its modules are in one entry, so a module that
#: joins one fails, as does any other cycle. Drop an entry when the work removing it lands.
ALLOWED_CYCLES: list[frozenset[str]] = []

#: ``(file, module)``: the package's string imports that stay. Each still counts as an import
#: for the layers and the cycles.
ALLOWED_STRING_IMPORTS: set[tuple[str, str]] = {
    # The lazy ``murmur_nb.widgets`` attribute (PEP 562 ``__getattr__``), so ipywidgets is
    # imported only when asked for; ``from murmur_nb import widgets`` in there would call
    # the same ``__getattr__`` again.
    ("murmur_nb/__init__.py", "murmur_nb.widgets"),
}

#: ``(test file, private module)``: attribute paths into a private module that tests used
#: before this rule, each with why it needs the internal. The accepted form is an import
#: saying why (``from murmur_nb._hooks import config  # private: <why>``); rewrite an entry
#: to it when its file is next edited, and drop the entry.
ALLOWED_PRIVATE_PATHS: set[tuple[str, str]] = {
    # load_hook_config: a HookHost with fast_lowering= (HookHost.from_config takes none);
    # DEFAULT_MEMORY_MIB: the default memory limit a message names.
    ("tests/test_hooks.py", "murmur_nb._hooks.config"),
    ("tests/test_hook_bounding.py", "murmur_nb._hooks.config"),
    ("tests/test_hook_guard.py", "murmur_nb._hooks.config"),
    ("tests/_exit_scenario.py", "murmur_nb._hooks.config"),
    # Switches off the load-time check_imports where the host looks it up (defence in depth:
    # the test's docstring says why).
    ("tests/test_hook_guard.py", "murmur_nb._hooks.host"),
    # wit_dir: the WIT contract folder the package ships, compared with the seed's files.
    ("tests/test_hook_wit.py", "murmur_nb._hooks.build"),
    # Runtime.get() binds wasmtime-py's own modules before the test takes wasmtime._ffi away.
    ("tests/test_hooks.py", "murmur_nb._hooks.runtime"),
    # TESTED_WASMTIME: the wasmtime range fast lowering was tested on, set to one excluding
    # the installed wasmtime.
    ("tests/test_hooks.py", "murmur_nb._hooks.lowering"),
    # compaction_diff's LookupError for a window the replay did not run, which the viewer's
    # pickers never ask for; the diff has no public path (the replay's move to _replay/ kept
    # this path, formerly mnb._hooks.replay.diff).
    ("tests/test_widgets_replay.py", "murmur_nb._replay.diff"),
}


def unit_of(module: str) -> str:
    """``murmur_nb._modules.host`` -> ``_modules``; ``murmur_nb`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_of(path: Path, package: Path) -> str:
    """``<package>/_modules/host.py`` -> ``murmur_nb._modules.host``; ``__init__.py`` files
    name their package."""
    rel = path.relative_to(package.parent)
    return ".".join(rel.with_suffix("").parts).removesuffix(".__init__")


def modules_of(package: Path) -> dict[str, Path]:
    """Every module of ``package`` (a ``murmur_nb`` tree) by name, its packages included."""
    return {module_of(path, package): path for path in sorted(package.rglob("*.py"))}


def absolute(package: str, name: str, level: int) -> str:
    """The absolute name of an import of ``name`` ``level`` dots up from ``package``."""
    if not level:
        return name
    parts = package.split(".")
    return ".".join(parts[: len(parts) - level + 1] + ([name] if name else []))


def is_sys_modules(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "modules"
        and (isinstance(node.value, ast.Name) and node.value.id == "sys")
    )


def literal_prefix(node: ast.expr) -> str | None:
    """A string constant, or the constant start of an f-string (``f"murmur_nb.x.{n}"`` ->
    ``murmur_nb.x``); ``None`` for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value.rstrip(".")
    return None


def named_module(node: ast.AST, package: str) -> str | None:
    """The module ``node`` imports or looks up by a string, made absolute:
    ``importlib.import_module("murmur_nb.x")`` or ``import_module(".x", __package__)``,
    ``__import__("murmur_nb.x")``, ``sys.modules["murmur_nb.x"]``,
    ``sys.modules.get("murmur_nb.x")``; ``None`` when it is none of those."""
    text = None
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        lookup = isinstance(func, ast.Attribute) and is_sys_modules(func.value)
        if name in ("import_module", "__import__") or (
            lookup and name in ("get", "pop", "setdefault")
        ):
            text = literal_prefix(node.args[0])
    elif isinstance(node, ast.Subscript) and is_sys_modules(node.value):
        text = literal_prefix(node.slice)
    if not text:
        return None
    stripped = text.lstrip(".")
    return absolute(package, stripped, len(text) - len(stripped))


def string_imports(tree: ast.AST, package: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every ``murmur_nb`` module named by a string in ``tree``."""
    found = [(getattr(node, "lineno", 0), named_module(node, package)) for node in ast.walk(tree)]
    return [(line, name) for line, name in found if name and name.split(".")[0] == "murmur_nb"]


def imported_modules(path: Path, module: str, known: Collection[str] = ()) -> list[tuple[int, str]]:
    """``(line, absolute module name)`` of every ``murmur_nb`` import in the file at ``path``:
    import statements anywhere in it, and string imports. ``from X import y`` imports ``X.y``
    when that is one of the ``known`` modules, else ``X``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = absolute(package, node.module or "", node.level)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.append((node.lineno, sub if sub in known else target))
    found += string_imports(tree, package)
    return sorted({(line, name) for line, name in found if name.split(".")[0] == "murmur_nb"})


# ------------------------------------------------------------------ layers point down


def back_imports(package: Path) -> list[str]:
    """Every import of ``package`` (a ``murmur_nb`` tree) that does not point down."""
    problems: list[str] = []
    for module, path in modules_of(package).items():
        rel = path.relative_to(package.parent)
        source = unit_of(module)
        if source not in LAYER_OF:
            problems.append(f"{rel}: {source} is in no layer; add it to LAYERS")
            continue
        for line, target in imported_modules(path, module):
            wanted = unit_of(target)
            if wanted == source:
                continue
            if LAYER_OF.get(wanted, -1) <= LAYER_OF[source]:
                problems.append(f"{rel}:{line}: {source} imports {target} (not below it)")
    return sorted(problems)


def test_the_package_layers_point_down() -> None:
    assert back_imports(PACKAGE) == []


def test_a_back_import_is_reported_even_when_lazy(tmp_path: Path) -> None:
    copy = tmp_path / "murmur_nb"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert back_imports(copy) == []
    (copy / "_render" / "sneak.py").write_text(
        "def run():\n    from murmur_nb._modules.host import ModuleHost\n    return ModuleHost\n"
    )
    (copy / "_files" / "sneak.py").write_text("from .._sandbox import launch\n")
    (copy / "_hooks" / "sneak.py").write_text("import murmur_nb._render.core\n")
    (copy / "_schemas" / "sneak.py").write_text(
        "import importlib\n\ndef run():\n"
        "    return importlib.import_module('murmur_nb._forms.form')\n"
    )
    assert back_imports(copy) == [
        "murmur_nb/_files/sneak.py:1: _files imports murmur_nb._sandbox (not below it)",
        "murmur_nb/_hooks/sneak.py:1: _hooks imports murmur_nb._render.core (not below it)",
        "murmur_nb/_render/sneak.py:2: _render imports murmur_nb._modules.host (not below it)",
        "murmur_nb/_schemas/sneak.py:4: _schemas imports murmur_nb._forms.form (not below it)",
    ]


def test_a_new_subpackage_must_be_given_a_layer(tmp_path: Path) -> None:
    copy = tmp_path / "murmur_nb"
    (copy / "_fresh").mkdir(parents=True)
    (copy / "_fresh" / "__init__.py").write_text("")
    assert back_imports(copy) == [
        "murmur_nb/_fresh/__init__.py: _fresh is in no layer; add it to LAYERS"
    ]


# ------------------------------------------------------------------ no import cycle


def unit_graph(package: Path) -> dict[str, set[str]]:
    """Which units each unit imports (every import, lazy ones too), read from the files."""
    graph: dict[str, set[str]] = {}
    for module, path in modules_of(package).items():
        source = unit_of(module)
        targets = {unit_of(target) for _, target in imported_modules(path, module)}
        graph.setdefault(source, set()).update(targets - {source})
    return graph


def import_cycle(package: Path) -> list[str]:
    """A cycle between units of ``package`` (``[]`` when there is none), independent of LAYERS."""
    try:
        graphlib.TopologicalSorter(unit_graph(package)).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


def test_the_import_graph_has_no_cycle_between_subpackages() -> None:
    assert import_cycle(PACKAGE) == []


def test_a_cycle_between_subpackages_is_found(tmp_path: Path) -> None:
    copy = tmp_path / "murmur_nb"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "_files" / "sneak.py").write_text("from murmur_nb._modules import host\n")
    cycle = import_cycle(copy)
    assert cycle[0] == cycle[-1] and {"_files", "_modules"} <= set(cycle)


def module_graph(package: Path) -> dict[str, dict[str, int]]:
    """Which modules of ``package`` each module imports, with the line of the first such
    import: every import counts (lazy, type-only, by string); a package's ``__init__`` is
    a module of its own, imported only where it is named."""
    modules = modules_of(package)
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        edges = graph.setdefault(module, {})
        for line, target in imported_modules(path, module, modules):
            if target in modules and target != module:
                edges.setdefault(target, line)
    return graph


def reachable(graph: dict[str, dict[str, int]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo += graph[node]
    return seen


def cycles(graph: dict[str, dict[str, int]]) -> list[frozenset[str]]:
    """Each set of modules that import each other (in a cycle, directly or through others)."""
    reach = {node: reachable(graph, node) for node in graph}
    parts = {
        frozenset({node} | {other for other in reach[node] if node in reach[other]})
        for node in graph
        if node in reach[node]
    }
    return sorted(parts, key=sorted)


def one_cycle(graph: dict[str, dict[str, int]], part: frozenset[str]) -> list[str]:
    """One cycle through ``part`` in import order, from its first module by name, which ends
    it again."""
    within = {node: set(graph[node]) & part for node in part}
    try:
        graphlib.TopologicalSorter(within).prepare()
    except graphlib.CycleError as exc:
        found = list(reversed(exc.args[1]))[1:]  # graphlib lists it from imported to importer
        start = found.index(min(found))
        return [*found[start:], *found[:start], found[start]]
    raise AssertionError(f"no cycle in {sorted(part)}")


def module_cycles(package: Path, allowed: Iterable[frozenset[str]] = ()) -> list[str]:
    """Every cycle between modules of ``package`` whose modules are not all in one ``allowed``
    set, as one cycle through it: each step the file and line of the import."""
    graph, modules, allowed = module_graph(package), modules_of(package), list(allowed)
    problems: list[str] = []
    for part in cycles(graph):
        if any(part <= ok for ok in allowed):
            continue
        steps = [
            f"{modules[a].relative_to(package.parent).as_posix()}:{graph[a][b]} imports {b}"
            for a, b in itertools.pairwise(one_cycle(graph, part))
        ]
        names = ", ".join(sorted(part))
        problems.append(f"{len(part)} modules in a cycle ({names}), one: " + "; ".join(steps))
    return problems


def test_no_module_imports_itself_through_others() -> None:
    """Inside a package too: a cycle made legal by a lazy or ``TYPE_CHECKING`` import is
    a cycle. Only the ones being removed right now pass (:data:`ALLOWED_CYCLES`)."""
    assert module_cycles(PACKAGE, ALLOWED_CYCLES) == []


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """The files (``"murmur_nb/_files/a.py": source``) under ``root``; returns the package."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root / "murmur_nb"


def test_a_module_cycle_inside_a_package_is_found_even_lazy_or_type_only(
    tmp_path: Path,
) -> None:
    package = write_tree(
        tmp_path,
        {
            "murmur_nb/__init__.py": "",
            "murmur_nb/_files/__init__.py": "from murmur_nb._files.beneath import open_beneath\n",
            "murmur_nb/_files/beneath.py": (
                "def open_beneath():\n    from murmur_nb._files import rules\n"
            ),
            "murmur_nb/_files/rules.py": "RULE = 1\n",
            "murmur_nb/_files/a.py": (
                "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .b import B\n"
            ),
            "murmur_nb/_files/b.py": "def f():\n    from murmur_nb._files import a\n",
            "murmur_nb/_files/c.py": (
                "import importlib\nD = importlib.import_module('murmur_nb._files.d')\n"
            ),
            "murmur_nb/_files/d.py": "import murmur_nb._files.c\n",
            "murmur_nb/_files/e.py": "from . import open_beneath\n",
            "murmur_nb/_files/f.py": "from murmur_nb._files import rules\n",  # imports, no cycle
        },
    )
    assert module_cycles(package) == [
        "2 modules in a cycle (murmur_nb._files.a, murmur_nb._files.b), one: "
        "murmur_nb/_files/a.py:4 imports murmur_nb._files.b; "
        "murmur_nb/_files/b.py:2 imports murmur_nb._files.a",
        "2 modules in a cycle (murmur_nb._files.c, murmur_nb._files.d), one: "
        "murmur_nb/_files/c.py:2 imports murmur_nb._files.d; "
        "murmur_nb/_files/d.py:1 imports murmur_nb._files.c",
    ]
    (package / "_files" / "rules.py").write_text("from murmur_nb._files import open_beneath\n")
    # the package's __init__ is a module of the cycle
    (three,) = [found for found in module_cycles(package) if found.startswith("3 modules")]
    assert {step.split(" ")[-3] for step in three.split("), one: ")[1].split("; ")} == {
        "murmur_nb/_files/__init__.py:1",
        "murmur_nb/_files/beneath.py:2",
        "murmur_nb/_files/rules.py:1",
    }


def test_an_allowed_cycle_passes_until_a_module_joins_it(tmp_path: Path) -> None:
    package = write_tree(
        tmp_path,
        {
            "murmur_nb/__init__.py": "",
            "murmur_nb/_modules/__init__.py": "",
            "murmur_nb/_modules/host.py": (
                "def map():\n    from murmur_nb._modules.batch import run\n"
            ),
            "murmur_nb/_modules/batch/__init__.py": "",
            "murmur_nb/_modules/batch/run.py": (
                "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                "    from murmur_nb._modules.host import ModuleHost\n"
            ),
            "murmur_nb/_modules/other.py": "from murmur_nb._modules import host\n",
        },
    )
    being_removed = [frozenset({"murmur_nb._modules.host", "murmur_nb._modules.batch.run"})]
    assert len(module_cycles(package)) == 1
    assert module_cycles(package, being_removed) == []
    (package / "_modules" / "host.py").write_text("from murmur_nb._modules import other\n")
    assert module_cycles(package, being_removed) == [
        "2 modules in a cycle (murmur_nb._modules.host, murmur_nb._modules.other), one: "
        "murmur_nb/_modules/host.py:1 imports murmur_nb._modules.other; "
        "murmur_nb/_modules/other.py:1 imports murmur_nb._modules.host"
    ]
    (package / "_modules" / "host.py").write_text(
        "from murmur_nb._modules import other\nfrom murmur_nb._modules.batch import run\n"
    )
    (package / "_modules" / "other.py").write_text("from murmur_nb._modules.batch import run\n")
    (package / "_modules" / "batch" / "run.py").write_text("import murmur_nb._modules.host\n")
    assert module_cycles(package, being_removed)[0].startswith("3 modules in a cycle (")


# ------------------------------------------------------------------ no hidden imports


def hidden_imports(package: Path, allowed: Collection[tuple[str, str]] = ()) -> list[str]:
    """Every string import of a ``murmur_nb`` module in ``package`` not in ``allowed``."""
    problems: list[str] = []
    for module, path in modules_of(package).items():
        rel = path.relative_to(package.parent).as_posix()
        package_name = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        problems += [
            f"{rel}:{line}: imports {target} by a string (write an import statement)"
            for line, target in string_imports(tree, package_name)
            if (rel, target) not in allowed
        ]
    return problems


def test_the_package_imports_its_own_modules_by_statement() -> None:
    assert hidden_imports(PACKAGE, ALLOWED_STRING_IMPORTS) == []


def test_a_string_import_of_the_package_is_reported(tmp_path: Path) -> None:
    package = write_tree(
        tmp_path,
        {
            "murmur_nb/__init__.py": "",
            "murmur_nb/_render/__init__.py": "",
            "murmur_nb/_render/loader.py": (
                "import importlib\nimport sys\nfrom importlib import import_module\n\n"
                "def load(name):\n"
                "    importlib.import_module('pyarrow')\n"  # not ours: fine
                "    sys.modules['jsonschema']\n"  # not ours: fine
                "    importlib.import_module(name)\n"  # not a literal: no module named
                "    importlib.import_module('murmur_nb._modules.host')\n"
                "    import_module('.primitives', __package__)\n"
                "    __import__('murmur_nb._hooks')\n"
                "    sys.modules['murmur_nb._modules.host']\n"
                "    sys.modules.get('murmur_nb._conversations')\n"
                "    importlib.import_module(f'murmur_nb._render.primitives.{name}')\n"
            ),
        },
    )
    found = hidden_imports(package)
    assert found == [
        f"murmur_nb/_render/loader.py:{line}: imports {name} by a string (write an import "
        "statement)"
        for line, name in [
            (9, "murmur_nb._modules.host"),
            (10, "murmur_nb._render.primitives"),
            (11, "murmur_nb._hooks"),
            (12, "murmur_nb._modules.host"),
            (13, "murmur_nb._conversations"),
            (14, "murmur_nb._render.primitives"),
        ]
    ]
    assert hidden_imports(package, {("murmur_nb/_render/loader.py", "murmur_nb._hooks")}) == [
        problem for problem in found if "murmur_nb._hooks " not in problem
    ]
    # and each is an import for the layers: _render (layer 8) importing _modules (layer 5)
    assert "murmur_nb/_render/loader.py:9: _render imports murmur_nb._modules.host " \
        "(not below it)" in back_imports(package)  # fmt: skip


# ------------------------------------------------------------------ folder size


def test_no_folder_holds_more_than_about_fifteen_modules() -> None:
    crowded = {
        str(folder.relative_to(PACKAGE.parent)): count
        for folder in [PACKAGE, *(d for d in PACKAGE.rglob("*") if d.is_dir())]
        if "__pycache__" not in folder.parts and "_demo" not in folder.parts
        if (count := len([p for p in folder.glob("*.py") if p.name != "__init__.py"]))
        > MAX_MODULES_PER_FOLDER
    }
    assert crowded == {}


# ------------------------------------------------------------------ tests reach private modules

TESTS = Path(__file__).parent
PRIVATE_REASON = "# private:"


def is_private(module: str) -> bool:
    """``murmur_nb._modules.host`` and ``murmur_nb.protocol._fold`` are; ``murmur_nb.widgets``
    is not."""
    parts = module.split(".")
    return parts[0] == "murmur_nb" and any(part.startswith("_") for part in parts[1:])


def private_imports(node: ast.AST) -> list[str]:
    """The private ``murmur_nb`` modules (or private names of a public one) ``node`` imports,
    by an import statement or by a string (``importlib.import_module("murmur_nb._x")``)."""
    named = named_module(node, "")  # a test is in no package: ".x" names nothing of ours
    if named and is_private(named):
        return [named]
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if is_private(alias.name)]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [
            f"{node.module}.{alias.name}"
            for alias in node.names
            if is_private(node.module) or is_private(f"{node.module}.{alias.name}")
        ]
    return []


def unexplained_private_imports(folder: Path) -> list[str]:
    """Every private import in ``folder``'s Python files without a ``# private: <why>`` comment
    on the import itself or on the line right above it."""
    problems: list[tuple[Path, int, str]] = []
    for path in sorted(folder.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = ["", *text.splitlines()]  # lines[n] is line n
        for node in ast.walk(ast.parse(text, str(path))):
            names = private_imports(node)
            if names and not explained(lines, node):
                problems.append((path, node.lineno, ", ".join(names)))
    return [
        f"{path.relative_to(folder.parent)}:{line}: {names} (say why, or go public)"
        for path, line, names in sorted(problems)
    ]


def explained(lines: list[str], node: ast.AST) -> bool:
    """A ``# private: <why>`` on one of the import's lines, or on a comment line right above."""
    assert isinstance(node, ast.stmt | ast.expr) and node.end_lineno is not None
    own = lines[node.lineno : node.end_lineno + 1]
    above = lines[node.lineno - 1]
    near = [*own, above] if above.lstrip().startswith("#") else own
    return any(line.partition(PRIVATE_REASON)[2].strip() for line in near)


def test_tests_reach_private_modules_only_saying_why() -> None:
    """A test uses ``murmur_nb``, ``murmur_nb.protocol`` or ``murmur_nb.widgets``; where no
    public path exists it imports the private module with a one-line ``# private: <why>``."""
    assert unexplained_private_imports(TESTS) == []


def test_a_private_import_without_a_reason_is_reported(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_fine.py").write_text(
        "import murmur_nb\n"
        "from murmur_nb.widgets import LiveRun\n"
        "from murmur_nb._rules import sha256_fd  # private: the digest rule on its own\n"
        "# private: the host's envelope rules\n"
        "from murmur_nb._modules.envelope import (\n    read_envelope,\n)\n"
    )
    (tests / "test_sneaky.py").write_text(
        "from murmur_nb._modules.host import ModuleHost\n"
        "def f():\n"
        "    import murmur_nb._render.core  # private:\n"
        "    from murmur_nb.protocol import _fold\n"
        "    from murmur_nb import _exceptions  # not a reason\n"
        "    from murmur_nb._files import beneath  # private: open beneath a folder\n"
        "    from murmur_nb._files import artifacts\n"
    )
    assert unexplained_private_imports(tests) == [
        "tests/test_sneaky.py:1: murmur_nb._modules.host.ModuleHost (say why, or go public)",
        "tests/test_sneaky.py:3: murmur_nb._render.core (say why, or go public)",
        "tests/test_sneaky.py:4: murmur_nb.protocol._fold (say why, or go public)",
        "tests/test_sneaky.py:5: murmur_nb._exceptions (say why, or go public)",
        "tests/test_sneaky.py:7: murmur_nb._files.artifacts (say why, or go public)",
    ]


def test_a_string_import_of_a_private_module_needs_a_reason_too(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_strings.py").write_text(
        "import importlib, sys\n"
        "def f():\n"
        "    importlib.import_module('murmur_nb._hooks.host')\n"
        "    importlib.reload(sys.modules['murmur_nb._render.render'])\n"
        "    importlib.import_module('murmur_nb.widgets')\n"
        "    importlib.import_module('._helpers', 'tests')\n"
        "    # private: a fresh copy of the module's globals\n"
        "    importlib.reload(importlib.import_module('murmur_nb._sandbox.identity'))\n"
    )
    assert unexplained_private_imports(tests) == [
        "tests/test_strings.py:3: murmur_nb._hooks.host (say why, or go public)",
        "tests/test_strings.py:4: murmur_nb._render.render (say why, or go public)",
    ]


# ------------------------------------------------------------------ ... never by attribute path

PATCH_CALLS = ("setattr", "delattr", "patch")  # monkeypatch.setattr("a.b.c", v), mock.patch


def is_private_name(name: str) -> bool:
    """``_hooks`` is; ``__file__`` and ``hooks`` are not."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def bound_modules(tree: ast.AST) -> tuple[dict[str, str], set[str]]:
    """The names a file binds to ``murmur_nb`` paths (``mnb`` -> ``murmur_nb``), and the
    dotted modules it imports whole (``import murmur_nb._hooks.cache``: that import says
    why it is private, and ``murmur_nb._hooks.cache.x`` is how such an import is used)."""
    names: dict[str, str] = {}
    whole: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "murmur_nb":
                    continue
                if alias.asname:  # import murmur_nb._x.y as y
                    names[alias.asname] = alias.name
                else:  # import murmur_nb._x.y binds murmur_nb
                    names["murmur_nb"] = "murmur_nb"
                    whole.add(alias.name)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("murmur_nb"):
            names |= {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names}
    return names, whole


def dotted(node: ast.expr) -> list[str]:
    """``mnb._hooks.config`` -> ``["mnb", "_hooks", "config"]``; ``[]`` unless names only."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    return [node.id, *parts] if isinstance(node, ast.Name) else []


def private_reached(path: list[str], modules: Collection[str]) -> str | None:
    """The private module (or private name of a module) that the public ``murmur_nb`` path
    ``path`` reaches by its first private step; ``None`` when it takes none from a module."""
    for step, name in enumerate(path[1:], start=1):
        if is_private_name(name):
            if ".".join(path[:step]) not in modules:
                return None  # a private attribute of a class or a value: another matter
            end = step + 1
            while end < len(path) and ".".join(path[: end + 1]) in modules:
                end += 1
            return ".".join(path[:end])
    return None


def private_paths(
    folder: Path, modules: Collection[str], allowed: Collection[tuple[str, str]] = ()
) -> list[str]:
    """Every place in ``folder``'s Python files that walks from public ``murmur_nb`` into a
    private module by an attribute path (``mnb._hooks.config``, ``murmur_nb.protocol._fold``)
    or a patch target string (``"murmur_nb._hooks.host.check_imports"``), unless the file
    and the module reached are ``allowed``."""
    problems: list[tuple[str, int, str]] = []
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(folder.parent).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        names, whole = bound_modules(tree)
        inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        for node in ast.walk(tree):
            chain: list[str] = []
            if isinstance(node, ast.Attribute) and id(node) not in inner:
                chain = dotted(node)
                root = names.get(chain[0], "") if chain else ""
                chain = [*root.split("."), *chain[1:]] if root and not is_private(root) else []
            elif isinstance(node, ast.Call) and node.args:
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                target = node.args[0]
                if name in PATCH_CALLS and isinstance(target, ast.Constant):
                    chain = str(target.value).split(".")
            reached = private_reached(chain, modules) if chain[:1] == ["murmur_nb"] else None
            if reached and reached not in whole and (rel, reached) not in allowed:
                problems.append((rel, node.lineno, reached))
    return [
        f"{rel}:{line}: reaches {reached} by an attribute path (import it with "
        "`# private: <why>`, or go public)"
        for rel, line, reached in sorted(set(problems))
    ]


def test_tests_reach_private_modules_by_import_not_by_attribute_path() -> None:
    """An attribute path (``mnb._hooks.config.load_hook_config``) reaches a private module
    with no import saying why; it works only while some other import loaded the module."""
    assert private_paths(TESTS, modules_of(PACKAGE), ALLOWED_PRIVATE_PATHS) == []


def test_a_private_attribute_path_in_a_test_is_reported(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_fine.py").write_text(
        "import murmur_nb\n"
        "import murmur_nb as mnb\n"
        "from murmur_nb import ModuleHost, widgets\n"
        "from murmur_nb._hooks import config  # private: the config rules on their own\n"
        "import murmur_nb._hooks.cache  # private: the cache itself is tested\n"
        "def test(monkeypatch):\n"
        "    mnb.ModuleHost(mnb.__file__).close()\n"
        "    widgets.LiveRun, murmur_nb.__version__, ModuleHost._invoke\n"
        "    config._DEFAULT, murmur_nb._hooks.cache.clear()\n"
        "    monkeypatch.setattr('murmur_nb.ModuleHost._invoke', None)\n"
        "    other._hooks.host\n"
    )
    (tests / "test_sneaky.py").write_text(
        "import murmur_nb\n"
        "import murmur_nb as mnb\n"
        "from murmur_nb import protocol\n"
        "import murmur_nb._hooks.cache  # private: the cache itself is tested\n"
        "from unittest import mock\n"
        "def test(monkeypatch):\n"
        "    mnb._hooks.config.load_hook_config('murmur.yaml')\n"
        "    monkeypatch.setattr(mnb._hooks.host, 'check_imports', None)\n"
        "    murmur_nb._render.render.render\n"
        "    protocol._primitives.PRIMITIVES, mnb.protocol._primitives\n"
        "    murmur_nb._hooks.build.wit_dir()\n"
        "    monkeypatch.setattr('murmur_nb._hooks.host.check_imports', None)\n"
        "    with mock.patch('murmur_nb._sandbox.sandbox.launch'):\n"
        "        pass\n"
    )
    modules = modules_of(PACKAGE)
    found = private_paths(tests, modules)
    assert found == [
        f"tests/test_sneaky.py:{line}: reaches {reached} by an attribute path (import it with "
        "`# private: <why>`, or go public)"
        for line, reached in [
            (7, "murmur_nb._hooks.config"),
            (8, "murmur_nb._hooks.host"),
            (9, "murmur_nb._render.render"),
            (10, "murmur_nb.protocol._primitives"),
            (11, "murmur_nb._hooks.build"),
            (12, "murmur_nb._hooks.host"),
            (13, "murmur_nb._sandbox.sandbox"),
        ]
    ]
    allowed = {("tests/test_sneaky.py", "murmur_nb._hooks.host")}
    assert private_paths(tests, modules, allowed) == [
        problem for problem in found if "_hooks.host " not in problem
    ]
