"""The OS sandbox and the process runner: run this argv confined, with these roots and limits.

The entry is two calls: :func:`launch` plans how to start an argv confined (from the
:func:`sandbox_report` of what this machine can enforce), :func:`run_launched` runs the plan
to the end within a deadline and an output cap. Everything else here serves those two.
"""

from murmur_nb._sandbox.evidence import RunEvidence
from murmur_nb._sandbox.runner import RunResult, run_launched, run_process
from murmur_nb._sandbox.sandbox import (
    MECHANISMS,
    MOST_TMPFS_BYTES,
    NETWORK_ISOLATION,
    SANDBOX_MODES,
    Launch,
    SandboxReport,
    hidden_interpreter,
    launch,
    sandbox_report,
)

__all__ = [
    "MECHANISMS",
    "MOST_TMPFS_BYTES",
    "NETWORK_ISOLATION",
    "SANDBOX_MODES",
    "Launch",
    "RunEvidence",
    "RunResult",
    "SandboxReport",
    "hidden_interpreter",
    "launch",
    "run_launched",
    "run_process",
    "sandbox_report",
]
