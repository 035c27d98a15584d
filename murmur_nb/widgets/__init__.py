"""Jupyter widgets over murmur-nb (ipywidgets 8).

Every widget is a thin view: what a button does is one plain call on the object the widget
was given (``host.invoke``, ``reader.read_messages``, ``hooks.task_start``), and each
widget's ``text/plain`` is a stable summary, so notebooks that show them compare cleanly.
This is the only part of murmur-nb that imports ipywidgets.

>>> from murmur_nb.widgets import ModuleBrowser  # doctest: +SKIP
>>> ModuleBrowser(host)                           # doctest: +SKIP
"""

from murmur_nb.widgets._capability_form import CapabilityForm
from murmur_nb.widgets._conversation_explorer import ConversationExplorer
from murmur_nb.widgets._hook_console import HookConsole
from murmur_nb.widgets._invocation_view import InvocationView
from murmur_nb.widgets._module_browser import ModuleBrowser

__all__ = [
    "CapabilityForm",
    "ConversationExplorer",
    "HookConsole",
    "InvocationView",
    "ModuleBrowser",
]
