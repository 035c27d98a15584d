"""One progress policy for the long runs the library draws a bar for: a batch, a replay.

``progress="auto"`` (the default of ``ModuleHost.map`` and ``murmur_nb.replay``) draws a bar
wherever someone is watching the run: in a Jupyter kernel a notebook bar (``tqdm.auto``: an
ipywidgets bar under the cell), in a terminal a text bar on stderr. A script whose stderr is
a pipe or a file gets none (its log would fill with carriage returns). ``True`` always draws
one (``tqdm.auto`` picks the kind), ``False`` never does.

Before this policy a foreground ``map`` in a notebook showed nothing for its whole run (its
"auto" drew only outside kernels) while a replay drew a bar everywhere, even into a log.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

__all__ = ["Progress", "in_kernel", "progress_bar", "wants_bar"]

#: what a caller passes as ``progress=``
Progress = bool | Literal["auto"]


def in_kernel() -> bool:
    """Whether this runs in a Jupyter kernel (an IPython kernel app is running here)."""
    if "ipykernel" not in sys.modules:  # no kernel imported it: no need to import IPython
        return False
    from IPython import get_ipython  # noqa: PLC0415 - only inside a kernel

    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def wants_bar(progress: Progress) -> bool:
    """Whether ``progress`` asks for a bar here (see the module's text)."""
    if progress == "auto":
        return in_kernel() or bool(getattr(sys.stderr, "isatty", lambda: False)())
    if not isinstance(progress, bool):
        raise ValueError(f"progress must be 'auto', True or False, not {progress!r}")
    return progress


def progress_bar(total: int, *, desc: str, unit: str, progress: Progress) -> Any:
    """A ``tqdm.auto`` bar of ``total`` ``unit``s when :func:`wants_bar`, else ``None``.

    The caller closes it (``bar.close()``) when the run ends.
    """
    if not wants_bar(progress):
        return None
    from tqdm.auto import tqdm  # noqa: PLC0415 - tqdm loads on first use

    return tqdm(total=total, desc=desc, unit=unit)
