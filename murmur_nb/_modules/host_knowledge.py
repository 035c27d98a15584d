"""The skill and agent-overlay methods of :class:`~murmur_nb.ModuleHost`.

They are thin: what a skill or overlay is, how it is found, verified, loaded, budgeted and
audited lives in :mod:`murmur_nb._knowledge.knowledge`, the agent's capability list in
:mod:`murmur_nb._knowledge.agent_listing`.
This mixin only binds them to a host's catalog (the descriptors it holds) and its
knowledge log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from murmur_nb._exceptions import ModuleNotFound
from murmur_nb._knowledge.agent_listing import AgentListing, agent_listing
from murmur_nb._knowledge.knowledge import (
    KnowledgeDocument,
    KnowledgeLog,
    SkillSelection,
    find_document,
    load_document,
    select_skills,
)
from murmur_nb._modules.catalog import Catalog
from murmur_nb._modules.invocation import ModuleInfo
from murmur_nb.protocol import Overlay, Skill

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["KnowledgeMethods"]


class KnowledgeMethods:
    """Skills and overlays of the modules a host holds (mixed into ``ModuleHost``)."""

    _catalog: Catalog
    _knowledge_log: KnowledgeLog

    def modules(self) -> list[ModuleInfo]:
        raise NotImplementedError  # ModuleHost.modules

    def skills(self, module_id: str) -> list[Skill]:
        """The skills ``module_id`` declares (id, title, summary, path, digest, tokens).

        Nothing is read: use :meth:`load_skill` or :meth:`skills_for` for the content.
        """
        return list(self._catalog.held(module_id)[1].skills or [])

    def overlays(self, module_id: str) -> list[Overlay]:
        """The agent overlays ``module_id`` declares (id, title, path, digest, tokens)."""
        return list(self._catalog.held(module_id)[1].agent_overlays or [])

    def load_skill(self, module_id: str, skill_id: str) -> KnowledgeDocument:
        """Read one skill, verified now against its declared digest, and audit the load.

        The declaration checked is the one the host holds from its last describe (of
        :meth:`describe`, :meth:`modules` or an invocation); a file changed since is refused
        whatever a new describe would declare. Describe the module again to accept a new
        version of its files.

        Raises
        ------
        ModuleNotFound
            No such module, or it declares no such skill.
        ConfinementViolation
            The file is not a regular file beneath the module folder (a link out of it,
            say); nothing is returned.
        DigestMismatch
            Its SHA-256 is not the declared digest (it changed since the module declared
            it); nothing is returned.

        Examples
        --------
        >>> doc = host.load_skill("critic", "critic.reviewing")  # doctest: +SKIP
        >>> doc.provenance()  # doctest: +SKIP
        'skill critic.reviewing · critic/skills/reviewing.md · 110 tokens · sha256:362e79ce6328'
        """
        folder, descriptor = self._catalog.held(module_id)
        entry = find_document(descriptor, "skill", skill_id)
        return load_document(folder, module_id, "skill", entry, self._knowledge_log)

    def load_overlay(self, module_id: str, overlay_id: str) -> KnowledgeDocument:
        """Read one agent overlay, verified like :meth:`load_skill`, and audit the load."""
        folder, descriptor = self._catalog.held(module_id)
        entry = find_document(descriptor, "overlay", overlay_id)
        return load_document(folder, module_id, "overlay", entry, self._knowledge_log)

    def skills_for(self, capability: str, *, budget_tokens: int | None = None) -> SkillSelection:
        """Load the skills ``capability`` lists, in its order, within ``budget_tokens``.

        Skills are picked by their declared ``tokens`` before anything is read, first fit
        (a skill that does not fit is left out, later smaller ones are still tried); only
        picked skills are loaded and verified. ``left_out`` says what was not folded in and
        why: ``budget``, ``unknown_skill``, ``no_estimate``, or a refusal code such as
        ``digest_mismatch`` (a refused skill never raises here: the others still load).

        Examples
        --------
        >>> host.skills_for("critic.review", budget_tokens=2000)  # doctest: +SKIP
        skills for critic.review · budget 2000 · 1 loaded, 110 tokens
          + skill critic.reviewing · critic/skills/reviewing.md · 110 tokens · sha256:362e79ce6328
        """
        folder, descriptor = self._catalog.held(self._catalog.owner(capability))
        cap = descriptor.capability(capability)
        if cap is None:
            raise ModuleNotFound(
                f"module {descriptor.module!r} has no capability {capability!r}; "
                "ModuleBrowser(host) or host.agent_listing() lists them"
            )
        return select_skills(folder, descriptor, cap, budget_tokens, self._knowledge_log)

    def agent_listing(self) -> AgentListing:
        """The capability list an agent would see, one line per enabled capability, priced.

        Enabled means accepted and with every requirement met. Each line carries the
        declared token cost of the module's overlays and of the capability's skills, so an
        operator sees what enabling a module costs; nothing is loaded.
        """
        return agent_listing(self.modules())

    def knowledge_audit(self) -> pd.DataFrame:
        """One row per skill or overlay load (refused ones too), oldest first.

        Columns: time, module, kind (``skill``/``overlay``), id, path, capability (set by
        :meth:`skills_for`), digest and tokens (as declared), bytes (read; ``<NA>`` when
        refused), outcome (``ok`` or the error code), message.
        """
        return self._knowledge_log.frame()

