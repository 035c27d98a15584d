"""murmur-nb: a capsule runtime's extension points and conversation history, in a notebook.

Host modproto v1 modules and WebAssembly hook components inside the kernel, render the
artifacts they produce inline, and load conversation records into pandas.

Where to start (each has its own ``help()``)::

    import murmur_nb as mnb

    home = mnb.prepare_demo_home()       # demo modules, a built hook, a conversation record
    host = home.host()                   # a ModuleHost over the demo modules

- ``prepare_demo_home(path=None)`` lays out the demo home and returns a ``DemoHome``
  (``.host()``, ``.hooks()``, ``.context_id``, ``.murmur_home``).
- ``ModuleHost(home, policy=Policy(...))`` lists, describes and invokes modules in a
  sandbox: ``host.modules()``, ``host.invoke("gallery.thumbs", {"count": 3})`` returns an
  ``Invocation``; ``host.map(...)`` runs many rows as a ``Batch``.
- ``HookHost.from_config("murmur.yaml")`` loads the WebAssembly hooks ``murmur.yaml``
  grants: ``hooks.task_start(task_id=..., context_id=...)``.
- ``read_conversation(context_id, murmur_home)`` loads one conversation record into a
  pandas DataFrame, ``read_conversations(murmur_home)`` every record;
  ``ConversationStore`` reads them page by page.
- ``render(invocation)`` shows an invocation's artifacts inline, each by its presentation
  hint (``render_file`` for one file).
- ``widgets`` (``mnb.widgets.ModuleBrowser(host)``, ``ConversationExplorer``,
  ``HookConsole``, ...): the same with clicks, in a notebook.
- ``check_module("path/to/module")`` and ``check_hook("hook.wasm")`` check a module or a
  hook you wrote against every rule the host enforces (also ``murmur-nb check``).

Every error is a ``MurmurError`` with a stable ``code`` (``ModuleHostError``,
``HookError``, ``ConversationReadError``, ...). ``DescriptorError`` is the old name of
``DescriptorProblem``, one describe-time breach listed on ``InvalidDescriptor.errors``.

``import murmur_nb`` stays cheap: pandas, wasmtime and the rendering libraries are imported
only when the feature that needs them is first used.
"""

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version

from murmur_nb import protocol

# importing the batch registers it as ModuleHost.map's driver (murmur_nb/_batch/__init__.py)
from murmur_nb._batch.batch import Batch
from murmur_nb._batch.progress import BatchProgress
from murmur_nb._checker.check import check_module
from murmur_nb._checker.check_report import CheckReport, CheckResult
from murmur_nb._checker.hook_check import check_hook
from murmur_nb._checker.hook_report import HookCheckReport, HookCheckResult
from murmur_nb._conversations.frames import read_conversation, read_conversations
from murmur_nb._conversations.store import (
    ConversationReader,
    ConversationStore,
    Message,
    MessagePage,
)
from murmur_nb._conversations.writer import RecordWriter
from murmur_nb._demo.home import DemoHome, prepare_demo_home
from murmur_nb._exceptions import (
    ApprovalRequired,
    ArtifactRejected,
    BatchInterrupted,
    ClusterWarning,
    ConfinementViolation,
    ConversationReadError,
    DeadlineExceeded,
    DescriptorProblem,
    DigestMismatch,
    HookConfigError,
    HookConfigWarning,
    HookError,
    InvalidContextId,
    InvalidDescriptor,
    InvalidInput,
    InvocationCancelled,
    MissingDependency,
    MissingRequirement,
    ModuleHostError,
    ModuleNotFound,
    ModuleTooLarge,
    MurmurError,
    NotGranted,
    OutputTooLarge,
    ProtocolViolation,
    RenderError,
    SandboxUnavailable,
    SandboxWarning,
    SizeMismatch,
)
from murmur_nb._files.artifacts import RejectedArtifact, VerifiedArtifact
from murmur_nb._hooks.build import build_demo_hook, build_python_hook
from murmur_nb._hooks.config import HookConfig
from murmur_nb._hooks.host import HookHost, HookInfo, HookResult
from murmur_nb._knowledge.agent_listing import AgentListing, CapabilityLine
from murmur_nb._knowledge.knowledge import (
    KnowledgeDocument,
    KnowledgeWarning,
    LeftOut,
    SkillSelection,
)
from murmur_nb._modules.host import ModuleHost
from murmur_nb._modules.invocation import Invocation, ModuleInfo
from murmur_nb._modules.policy import Policy
from murmur_nb._modules.prepared import PreparedCall
from murmur_nb._modules.staging import ArtifactStore, StagedArtifact
from murmur_nb._render.core import RenderBudget, Rendering, Slide
from murmur_nb._render.presentation import PresentationWarning, resolve_presentation
from murmur_nb._render.render import render, render_file
from murmur_nb._replay.compare import ReplayComparison, compare_replays
from murmur_nb._replay.replay import replay
from murmur_nb._replay.windows import ReplayWindows
from murmur_nb._sandbox import RunEvidence, SandboxReport
from murmur_nb._schemas.descriptor import DescriptorError
from murmur_nb.protocol import PRIMITIVES


def __getattr__(name: str) -> object:
    """``murmur_nb.widgets`` on first use, so ipywidgets is imported only then."""
    if name == "widgets":
        import importlib  # noqa: PLC0415 - ipywidgets only when asked for

        return importlib.import_module("murmur_nb.widgets")
    raise AttributeError(f"module 'murmur_nb' has no attribute {name!r}")


try:
    __version__ = _version("murmur-nb")
except _PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "AgentListing",
    "ApprovalRequired",
    "ArtifactRejected",
    "ArtifactStore",
    "Batch",
    "BatchInterrupted",
    "BatchProgress",
    "CapabilityLine",
    "CheckReport",
    "CheckResult",
    "ClusterWarning",
    "ConfinementViolation",
    "ConversationReadError",
    "ConversationReader",
    "ConversationStore",
    "DeadlineExceeded",
    "DemoHome",
    "DescriptorError",
    "DescriptorProblem",
    "DigestMismatch",
    "HookCheckReport",
    "HookCheckResult",
    "HookConfig",
    "HookConfigError",
    "HookConfigWarning",
    "HookError",
    "HookHost",
    "HookInfo",
    "HookResult",
    "InvalidContextId",
    "InvalidDescriptor",
    "InvalidInput",
    "Invocation",
    "InvocationCancelled",
    "KnowledgeDocument",
    "KnowledgeWarning",
    "LeftOut",
    "Message",
    "MessagePage",
    "MissingDependency",
    "MissingRequirement",
    "ModuleHost",
    "ModuleHostError",
    "ModuleInfo",
    "ModuleNotFound",
    "ModuleTooLarge",
    "MurmurError",
    "NotGranted",
    "OutputTooLarge",
    "PRIMITIVES",
    "Policy",
    "PreparedCall",
    "PresentationWarning",
    "ProtocolViolation",
    "RecordWriter",
    "RejectedArtifact",
    "RenderBudget",
    "RenderError",
    "Rendering",
    "ReplayComparison",
    "ReplayWindows",
    "RunEvidence",
    "SandboxReport",
    "SandboxUnavailable",
    "SandboxWarning",
    "SizeMismatch",
    "SkillSelection",
    "Slide",
    "StagedArtifact",
    "VerifiedArtifact",
    "__version__",
    "build_demo_hook",
    "build_python_hook",
    "check_hook",
    "check_module",
    "compare_replays",
    "prepare_demo_home",
    "protocol",
    "read_conversation",
    "read_conversations",
    "render",
    "render_file",
    "replay",
    "resolve_presentation",
    "widgets",
]
