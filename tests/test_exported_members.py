"""The public namespace is exactly ``__all__``, sorted, and importing it stays light."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import murmur_nb

HEAVY = ("pandas", "wasmtime", "ipywidgets", "PIL", "pyarrow", "jsonschema")

#: The public names before the package was split into subpackages (issue 23); none may go.
BEFORE_THE_SPLIT = {
    "murmur_nb": """
        AgentListing ApprovalRequired ArtifactRejected ArtifactStore CapabilityLine CheckReport
        CheckResult ConfinementViolation ConversationReadError ConversationReader
        ConversationStore DeadlineExceeded DemoHome DescriptorError DescriptorProblem
        DigestMismatch HookConfig HookConfigError HookError HookHost HookInfo HookResult
        InvalidContextId InvalidDescriptor InvalidInput Invocation InvocationCancelled
        KnowledgeDocument KnowledgeWarning LeftOut Message MessagePage MissingDependency
        MissingRequirement ModuleHost ModuleHostError ModuleInfo ModuleNotFound ModuleTooLarge
        MurmurError NotGranted OutputTooLarge PRIMITIVES Policy PresentationWarning
        ProtocolViolation RecordWriter RejectedArtifact RenderBudget RenderError Rendering
        SandboxReport SandboxUnavailable SandboxWarning SizeMismatch SkillSelection Slide
        StagedArtifact VerifiedArtifact __version__ build_demo_hook build_python_hook
        check_module prepare_demo_home protocol read_conversation read_conversations render
        render_file resolve_presentation widgets
    """,
    "murmur_nb.protocol": """
        Artifact Capability Descriptor Effects Envelope Error Execution Grants
        OPERATION_DESCRIBE OPERATION_INVOKE Overlay PROTOCOL_ID Permissions Request Requirement
        Root Skill
    """,
    "murmur_nb.widgets": """
        CapabilityForm ConversationExplorer HookConsole InvocationView LiveRun ModuleBrowser
    """,
}


def test_all_is_sorted_and_unique() -> None:
    assert murmur_nb.__all__ == sorted(murmur_nb.__all__)
    assert len(set(murmur_nb.__all__)) == len(murmur_nb.__all__)


def test_all_matches_public_names() -> None:
    # Only names a user can write as murmur_nb.<name>: pytest's assertion rewriting (it
    # rewrites every module of a plugin's distribution, and murmur-nb ships a pytest plugin)
    # adds '@py_builtins' and '@pytest_ar', which no attribute access can reach.
    public = {
        name
        for name, value in vars(murmur_nb).items()
        if name.isidentifier()
        and not name.startswith("_")
        and getattr(value, "__module__", "murmur_nb").startswith("murmur_nb")
    }
    public -= {"version", "PackageNotFoundError"}
    assert public <= set(murmur_nb.__all__)
    for name in murmur_nb.__all__:
        assert hasattr(murmur_nb, name), name


def test_both_checkers_are_public() -> None:
    for name in ("check_module", "CheckReport", "check_hook", "HookCheckReport",
                 "HookCheckResult"):  # fmt: skip
        assert name in murmur_nb.__all__, name
    assert murmur_nb.check_hook.__module__ == "murmur_nb._checker.hook_check"


def test_import_does_not_load_heavy_packages() -> None:
    code = (
        "import sys, murmur_nb\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_render_error_is_deprecated_but_still_caught() -> None:
    """Nothing raises it any more; making one warns, an ``except RenderError`` still works."""
    import pytest

    with pytest.warns(DeprecationWarning, match="goes in 0.2"):
        err = murmur_nb.RenderError("old code path")
    try:
        raise err
    except murmur_nb.RenderError as caught:
        assert caught.code == "render_failed"


def test_no_public_name_is_lost() -> None:
    """Every name public before the split is still in ``__all__`` and importable."""
    for path, names in BEFORE_THE_SPLIT.items():
        module = importlib.import_module(path)
        lost = sorted(set(names.split()) - set(module.__all__))
        assert lost == [], f"{path} lost {lost}"
        assert all(hasattr(module, name) for name in names.split())


def test_render_error_is_raised_nowhere_in_the_package() -> None:
    """The deprecation is honest: no module of murmur-nb makes or raises a ``RenderError``
    (an ``except RenderError`` in user code would wait for nothing)."""
    package = Path(murmur_nb.__file__).parent
    made = [
        f"{path.relative_to(package)}:{node.lineno}"
        for path in sorted(package.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None)) == "RenderError"
    ]
    assert made == []


def test_importing_render_error_does_not_warn() -> None:
    """Only making one warns: ``from murmur_nb import RenderError`` under ``-W error`` works."""
    code = "from murmur_nb import RenderError\nprint(RenderError.code)\n"
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "render_failed"
