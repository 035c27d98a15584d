"""Every module the host sees: version, capabilities, effects, setup needs, refusals.

The browser is :meth:`ModuleHost.modules` drawn as cards. Selecting a capability opens a
:class:`CapabilityForm` for it below the list, so the whole loop — find, fill, approve,
run, look at the artifacts — happens in one place.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import ipywidgets as w

from murmur_nb._exceptions import ModuleHostError
from murmur_nb.widgets._capability_form import CapabilityForm
from murmur_nb.widgets._html import TextView, badge, effect_badges, effect_words, esc

__all__ = ["ModuleBrowser", "format_validation_error"]


def format_validation_error(error: Any) -> str:
    """``path: detail`` for a validation error object, its ``str`` otherwise."""
    path = getattr(error, "path", None)
    detail = getattr(error, "detail", None)
    if path is not None and detail is not None:
        return f"{path}: {detail}" if path else str(detail)
    return str(error)


def _unmet(info: Any) -> list[Any]:
    unmet = getattr(info, "unmet_requirements", None)
    if unmet is not None:
        return list(unmet)
    return [r for r in (info.descriptor.requirements or ()) if not r.available]


class ModuleBrowser(TextView):
    """Browse the modules of a :class:`~murmur_nb.ModuleHost` and open their capabilities.

    Parameters
    ----------
    host : ModuleHost

    Attributes
    ----------
    modules : list
        ``host.modules()`` as of the last refresh.
    capability_picker : ipywidgets.Dropdown
        Every capability of the usable modules; choose one and click ``open_button``.
    form : CapabilityForm or None
        The form opened last.
    """

    def __init__(self, host: Any) -> None:
        self.host = host
        self.modules: list[Any] = []
        self.form: CapabilityForm | None = None
        self.refresh_button = w.Button(description="Refresh", icon="refresh")
        self.summary = w.HTML()
        self.cards = w.HTML()
        self.capability_picker = w.Dropdown(description="Capability", options=[])
        self.open_button = w.Button(description="Open form", button_style="primary")
        self.form_box = w.VBox()
        self.refresh_button.on_click(lambda _b: self.refresh())
        self.open_button.on_click(lambda _b: self._open_clicked())
        super().__init__(
            [
                w.HBox([self.refresh_button, self.summary]),
                self.cards,
                w.HBox([self.capability_picker, self.open_button]),
                self.form_box,
            ]
        )
        self.refresh(rescan=False)

    def _open_clicked(self) -> None:
        try:
            self.open_form(self.capability_picker.value)
        except ModuleHostError as exc:  # e.g. the module was changed and is now refused
            self.form = None
            self.form_box.children = (
                w.HTML(f"<div>{badge(exc.code, 'error')}{esc(exc.message)}</div>"),
            )

    def _gate(self, descriptor: Any, capability: Any) -> list[str]:
        """Why the host's policy asks approval for ``capability`` (no module is run).

        This is the policy's standing rule; whether an operator already approved the
        current descriptor is asked of the host when the capability is run.
        """
        policy = getattr(self.host, "policy", None)
        if policy is None or not hasattr(policy, "approval_reasons"):
            return []
        return list(policy.approval_reasons(descriptor, capability))

    def refresh(self, *, rescan: bool = True) -> None:
        """Ask the host again: modules added, fixed or changed show up.

        With ``rescan`` (the Refresh button) every module's ``describe`` is run anew
        through ``host.describe``, so a change anywhere in a module folder is seen, not
        only a change to its ``module`` executable; without it the host's cached
        descriptors are listed.
        """
        if rescan:
            for info in self.host.modules():
                # refused again (or gone): host.modules() below lists why
                with contextlib.suppress(ModuleHostError):
                    self.host.describe(info.id)
        self.modules = sorted(self.host.modules(), key=lambda m: m.id)
        self.cards.value = "".join(self._card(m) for m in self.modules)
        refused = sum(1 for m in self.modules if m.descriptor is None)
        setup = sum(1 for m in self.modules if m.descriptor is not None and m.needs_setup)
        self.summary.value = (
            f"{len(self.modules)} modules"
            + (" " + badge(f"{refused} refused", "error") if refused else "")
            + (" " + badge(f"{setup} need setup", "warn") if setup else "")
            + " " + self._sandbox_badge()
        )
        options = [
            (f"{cap.id} — {cap.title}" if cap.title else cap.id, cap.id)
            for m in self.modules
            if m.descriptor is not None
            for cap in m.descriptor.capabilities or ()
        ]
        self.capability_picker.options = options
        self.open_button.disabled = not options

    def _sandbox_badge(self) -> str:
        """How module processes are confined on this machine (``host.sandbox``)."""
        report = getattr(self.host, "sandbox", None)
        if report is None:
            return ""
        kind = "ok" if report.complete else ("error" if report.mode == "required" else "warn")
        return badge(f"sandbox: {report.confinement}", kind, title=str(report))

    def open_form(self, capability_id: str | None) -> CapabilityForm | None:
        """Open the form for ``capability_id`` below the list."""
        if not capability_id:
            return None
        self.form = CapabilityForm(self.host, capability_id)
        self.form_box.children = (self.form,)
        if self.capability_picker.value != capability_id:
            self.capability_picker.value = capability_id
        return self.form

    def _card(self, info: Any) -> str:
        style = "border:1px solid #dadce0;border-radius:6px;padding:6px 10px;margin:4px 0"
        d = info.descriptor
        if d is None:
            errors = "".join(
                f"<li><code>{esc(format_validation_error(e))}</code></li>"
                for e in info.errors or ()
            )
            return (
                f'<div style="{style}"><b>{esc(info.id)}</b> {badge("refused", "error")}'
                f"<ul>{errors}</ul></div>"
            )
        head = f"<b>{esc(d.name or info.id)}</b> <code>{esc(info.id)}</code>"
        head += f" {badge('v' + d.version, 'muted')}" if d.version else ""
        parts = [head]
        if info.needs_setup:
            needs = "".join(
                f"<li><b>{esc(r.kind)} {esc(r.name)}</b>: {esc(r.detail or 'not available')}</li>"
                for r in _unmet(info)
            )
            parts.append(f"{badge('Needs setup', 'warn')}<ul>{needs}</ul>")
        rows = []
        for cap in d.capabilities or ():
            title = f" — {esc(cap.title)}" if cap.title else ""
            summary = f"<br><small>{esc(cap.summary)}</small>" if cap.summary else ""
            extra = badge("long-running", "info") if cap.long_running else ""
            reasons = self._gate(d, cap)
            if reasons:
                extra += badge("needs approval", "warn", title="; ".join(reasons))
            rows.append(
                f"<li><code>{esc(cap.id)}</code>{title} {extra}{effect_badges(cap.effects)}"
                f"{summary}</li>"
            )
        parts.append(f"<ul>{''.join(rows)}</ul>")
        return f'<div style="{style}">' + "".join(parts) + "</div>"

    def text(self) -> str:
        lines = [f"ModuleBrowser: {len(self.modules)} modules"]
        for info in self.modules:
            d = info.descriptor
            if d is None:
                lines.append(f"  {info.id}: refused")
                lines.extend(f"    ✗ {format_validation_error(e)}" for e in info.errors or ())
                continue
            version = f" {d.version}" if d.version else ""
            setup = " [Needs setup]" if info.needs_setup else ""
            lines.append(f"  {info.id}{version}{setup}")
            if info.needs_setup:
                lines.extend(
                    f"    needs {r.kind} {r.name}: {r.detail or 'not available'}"
                    for r in _unmet(info)
                )
            for cap in d.capabilities or ():
                words = effect_words(cap.effects)
                if self._gate(d, cap):
                    words.append("needs approval")
                lines.append(f"    {cap.id} [{', '.join(words)}]")
        if self.form is not None:
            lines.append(f"  open: {self.form.capability_id}")
        return self._portable("\n".join(lines))

    def _portable(self, text: str) -> str:
        """Name the host's home ``$FACET_STUDIO_HOME`` so the text is the same anywhere."""
        home = getattr(self.host, "home", None)
        if home is None:
            return text
        for spelling in sorted({os.fspath(home), os.path.realpath(home)}, key=len, reverse=True):
            text = text.replace(spelling, "$FACET_STUDIO_HOME")
        return text
