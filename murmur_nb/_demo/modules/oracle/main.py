"""Demo module ``oracle``: a second opinion from a paid provider of unknown price.

``oracle.critique`` goes to the provider ``demo-oracle``, whose price is not known in advance:
``effects.cost_known`` is false and the execution reports ``estimated_cost`` and
``actual_cost`` as null (*unknown*, never free). The module declares the paid provider in its
permissions, so under the SPEC's default policy the host asks the operator before every call.
The provider is simulated inside this process (the demo reaches no network); the module still
refuses to run unless the host granted ``paid_providers: ["demo-oracle"]``.

Its input is an image staged read-only by the host, like ``critic.review``'s.
"""

from __future__ import annotations

import io
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from murmur_nb._demo.modules import _kit as kit
else:  # the installed module folder carries its own copy of the kit
    import _kit as kit

from PIL import Image, ImageStat

MODULE = "oracle"
PROVIDER = "demo-oracle"

DESCRIPTOR: dict[str, Any] = {
    "module": MODULE,
    "name": "Oracle (paid provider)",
    "version": "1.0.0",
    "protocol_versions": [kit.PROTOCOL_ID],
    "capabilities": [
        kit.capability(
            "oracle.critique",
            "Composition critique (paid, price unknown)",
            "Ask the demo-oracle provider to score an image's balance; cost unknown.",
            artifacts=["oracle.critique"],
            cap_effects=kit.effects(provider=PROVIDER, cost_known=False),
        )
    ],
    "request_schemas": {
        "oracle.critique.request": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "image": {
                    "type": "object",
                    "properties": {
                        "root": {"type": "string", "minLength": 1},
                        "path": {"type": "string", "minLength": 1},
                    },
                    "required": ["root", "path"],
                    "additionalProperties": False,
                }
            },
            "required": ["image"],
            "additionalProperties": False,
        }
    },
    "result_schemas": {
        "oracle.critique.result": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "provider": {"type": "string"},
                "score": {"type": "integer", "minimum": 1, "maximum": 10},
            },
            "required": ["provider", "score"],
        }
    },
    "artifact_schemas": {
        "oracle.critique": {"$schema": kit.SCHEMA_DIALECT, "contentMediaType": "text/markdown"}
    },
    "agent_overlays": [],
    "skills": [],
    "permissions": {
        "filesystem_read": ["staged"],
        "filesystem_write": ["out"],
        "network": [],
        "credentials": [],
        "paid_providers": [PROVIDER],
        "publish": False,
        "subprocess": [],
    },
    "requirements": [],
}


def critique(ctx: kit.Context) -> kit.Outcome:
    if not ctx.granted("paid_providers", PROVIDER):
        raise kit.Failure(
            "not_granted",
            f"the paid provider {PROVIDER!r} was not granted to this call; allow it in the "
            f"host policy (paid_providers=[{PROVIDER!r}]) and approve the call",
            details={"provider": PROVIDER},
        )
    ref = ctx.input.get("image")
    if not isinstance(ref, dict):
        raise kit.Failure("invalid_input", "'image' must be {'root': ..., 'path': ...}")
    try:
        image = Image.open(io.BytesIO(ctx.read_file(ref)))
        grey = image.convert("L")
    except (OSError, ValueError) as exc:
        raise kit.Failure(
            "unreadable_image", f"{ref.get('path')!r} is not an image: {exc}"
        ) from exc
    contrast = ImageStat.Stat(grey).stddev[0] / 128
    small = grey.resize((32, 32))
    values = [int(v) for v in small.tobytes()]
    total = sum(values) or 1
    cx = sum((i % 32) * v for i, v in enumerate(values)) / total / 31
    cy = sum((i // 32) * v for i, v in enumerate(values)) / total / 31
    off = ((cx - 0.5) ** 2 + (cy - 0.5) ** 2) ** 0.5
    score = max(1, min(10, round(10 - 12 * off - 4 * abs(contrast - 0.35))))
    md = (
        f"# Second opinion from {PROVIDER}\n\n"
        f"`{ref.get('path')}` scores **{score}/10** for balance.\n\n"
        f"- visual centre of mass at ({cx:.2f}, {cy:.2f}) of the frame\n"
        f"- contrast {contrast:.2f} (0.35 reads best)\n\n"
        "_This opinion came from a paid provider; its price was not known in advance._\n"
    )
    ctx.write("critique.md", md.encode(), kind="oracle.critique", media_type="text/markdown",
              presentation="markdown", title=f"{PROVIDER}: {score}/10")
    # Unknown stays unknown: the provider quotes no price, so both costs are null.
    return kit.Outcome({"provider": PROVIDER, "score": score}, provider=PROVIDER,
                       estimated_cost=None, actual_cost=None)


HANDLERS: dict[str, kit.Handler] = {"oracle.critique": critique}


def main(argv: list[str]) -> int:
    return kit.run(DESCRIPTOR, HANDLERS, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
