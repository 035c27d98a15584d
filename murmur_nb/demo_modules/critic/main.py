"""Demo module ``critic``: reviews an image another module produced (cross-module handoff).

The image arrives the only way a module may receive another module's file: the host stages
the producer's artifact into its content-addressed store and supplies that store as a
read-only root; the input names the root and the path inside it
(``{"image": {"root": "staged", "path": "..."}}``). The critic never learns the producer's
layout.

* ``critic.review`` is local and free: it measures the image and writes a Markdown review, a
  JSON of the measurements and an annotated copy.
* ``critic.second_opinion`` goes to the paid provider ``demo-oracle`` whose price is not known
  in advance (``cost_known`` false; the execution reports ``estimated_cost`` and
  ``actual_cost`` as null, *unknown*), so the host needs the operator's approval first. The
  provider is simulated inside this process; the module still refuses to run unless the host
  granted ``paid_providers: ["demo-oracle"]``.
"""

from __future__ import annotations

import io
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from murmur_nb.demo_modules import _kit as kit
else:  # the installed module folder carries its own copy of the kit
    import _kit as kit

from PIL import Image, ImageDraw, ImageStat

MODULE = "critic"
PROVIDER = "demo-oracle"

_IMAGE_REF = {
    "type": "object",
    "description": "Where the image is: a root the host supplied to this call, and a path in it.",
    "properties": {
        "root": {"type": "string", "minLength": 1, "default": "staged"},
        "path": {"type": "string", "minLength": 1},
    },
    "required": ["root", "path"],
    "additionalProperties": False,
}


def _request() -> dict[str, Any]:
    return {
        "$schema": kit.SCHEMA_DIALECT,
        "type": "object",
        "properties": {"image": _IMAGE_REF},
        "required": ["image"],
        "additionalProperties": False,
    }


DESCRIPTOR: dict[str, Any] = {
    "module": MODULE,
    "name": "Critic",
    "version": "1.0.0",
    "protocol_versions": [kit.PROTOCOL_ID],
    "capabilities": [
        kit.capability(
            "critic.review",
            "Review an image",
            "Measure a staged image: size, colour, contrast; Markdown, JSON, annotated copy.",
            artifacts=["critic.notes", "critic.measurements", "critic.annotated"],
            skills=["critic.reviewing"],
        ),
        kit.capability(
            "critic.second_opinion",
            "Second opinion (paid, price unknown)",
            "Ask the demo-oracle provider for a composition critique; cost unknown.",
            artifacts=["critic.notes"],
            cap_effects=kit.effects(provider=PROVIDER, cost_known=False),
            skills=["critic.reviewing"],
        ),
    ],
    "request_schemas": {
        "critic.review.request": _request(),
        "critic.second_opinion.request": _request(),
    },
    "result_schemas": {
        "critic.review.result": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "width": {"type": "integer"},
                "height": {"type": "integer"},
                "brightness": {"type": "number"},
                "contrast": {"type": "number"},
                "verdict": {"type": "string"},
            },
            "required": ["width", "height", "brightness", "contrast", "verdict"],
        },
        "critic.second_opinion.result": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {"provider": {"type": "string"}, "score": {"type": "integer"}},
            "required": ["provider", "score"],
        },
    },
    "artifact_schemas": {
        "critic.notes": {"$schema": kit.SCHEMA_DIALECT, "contentMediaType": "text/markdown"},
        "critic.measurements": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "histogram": {"type": "array", "items": {"type": "integer"}},
                "dominant": {"type": "array", "items": {"type": "string"}},
            },
        },
        "critic.annotated": {"$schema": kit.SCHEMA_DIALECT, "contentMediaType": "image/png"},
    },
    "agent_overlays": [],
    "skills": [
        {
            "id": "critic.reviewing",
            "title": "Reviewing an image",
            "summary": "What the critic measures and how to hand it a staged artifact.",
            "path": "skills/reviewing.md",
            "digest": "sha256:fd346b7f552cc7249d485e4e0f15a0e8b0396c0d8fcee77d702c9acbef764a00",
            "tokens": 110,
        }
    ],
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


def _load(ctx: kit.Context) -> tuple[Image.Image, str]:
    ref = ctx.input.get("image")
    if not isinstance(ref, dict):
        raise kit.Failure("invalid_input", "'image' must be {'root': ..., 'path': ...}")
    data = ctx.read_file(ref)
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except (OSError, ValueError) as exc:
        raise kit.Failure(
            "unreadable_image", f"{ref.get('path')!r} is not an image Pillow can read: {exc}"
        ) from exc
    return image.convert("RGB"), str(ref.get("path"))


def _measure(image: Image.Image) -> dict[str, Any]:
    grey = image.convert("L")
    stat = ImageStat.Stat(grey)
    histogram = grey.histogram()
    bins = [sum(histogram[i : i + 16]) for i in range(0, 256, 16)]
    small = image.quantize(colors=4, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    palette = small.getpalette() or []
    # A "P" image's colours are (count, palette index) pairs.
    counts = sorted(
        ((n, i) for n, i in small.getcolors() or [] if isinstance(i, int)), reverse=True
    )
    dominant = [
        "#{:02x}{:02x}{:02x}".format(*palette[3 * index : 3 * index + 3]) for _, index in counts
    ]
    mean = ImageStat.Stat(image).mean
    return {
        "width": image.width,
        "height": image.height,
        "mean_rgb": [round(c, 2) for c in mean],
        "brightness": round(stat.mean[0] / 255, 4),
        "contrast": round(stat.stddev[0] / 128, 4),
        "histogram": bins,
        "dominant": dominant,
    }


def _verdict(m: dict[str, Any]) -> str:
    tone = "dark" if m["brightness"] < 0.35 else "bright" if m["brightness"] > 0.7 else "balanced"
    punch = "flat" if m["contrast"] < 0.2 else "punchy" if m["contrast"] > 0.45 else "moderate"
    return f"{tone} exposure, {punch} contrast"


def review(ctx: kit.Context) -> kit.Outcome:
    image, path = _load(ctx)
    m = _measure(image)
    verdict = _verdict(m)
    md = [
        f"# Review of `{path}`\n",
        f"**Verdict:** {verdict}.\n",
        "| measure | value |",
        "| --- | --- |",
        f"| size | {m['width']} x {m['height']} |",
        f"| brightness | {m['brightness']:.2f} |",
        f"| contrast | {m['contrast']:.2f} |",
        f"| mean colour | rgb({', '.join(f'{c:.0f}' for c in m['mean_rgb'])}) |",
        f"| dominant colours | {', '.join(m['dominant'])} |",
        "",
    ]
    ctx.write("review/review.md", "\n".join(md).encode(), kind="critic.notes",
              media_type="text/markdown", presentation="markdown", title=f"Review: {verdict}")
    ctx.write("review/measurements.json", (json.dumps(m, indent=2) + "\n").encode(),
              kind="critic.measurements", media_type="application/json", presentation="json",
              title="Measurements")
    strip = 40
    annotated = Image.new("RGB", (image.width, image.height + strip), "white")
    annotated.paste(image, (0, 0))
    draw = ImageDraw.Draw(annotated)
    peak = max(m["histogram"]) or 1
    bar_w = image.width / len(m["histogram"])
    for i, count in enumerate(m["histogram"]):
        h = round((strip - 4) * count / peak)
        if h == 0:
            continue
        x0 = round(i * bar_w)
        draw.rectangle([x0, image.height + strip - h, round(x0 + bar_w) - 1,
                        image.height + strip - 1], fill=(i * 16, i * 16, i * 16))
    for i, colour in enumerate(m["dominant"]):
        draw.rectangle([4 + 14 * i, 4, 14 + 14 * i, 14], fill=colour, outline="white")
    buf = io.BytesIO()
    annotated.save(buf, format="PNG")
    ctx.write("review/annotated.png", buf.getvalue(), kind="critic.annotated",
              media_type="image/png", presentation="image", title="Annotated with histogram")
    return kit.Outcome(
        {"width": m["width"], "height": m["height"], "brightness": m["brightness"],
         "contrast": m["contrast"], "verdict": verdict},
        estimated_cost=0.0,
        actual_cost=0.0,
    )


def second_opinion(ctx: kit.Context) -> kit.Outcome:
    if not ctx.granted("paid_providers", PROVIDER):
        raise kit.Failure(
            "not_granted",
            f"the paid provider {PROVIDER!r} was not granted to this call; allow it in the "
            f"host policy (paid_providers=[{PROVIDER!r}]) and approve the call",
            details={"provider": PROVIDER},
        )
    image, path = _load(ctx)
    m = _measure(image)
    # The simulated provider scores balance: how far the visual mass sits from the centre.
    grey = image.convert("L").resize((32, 32))
    values = list(grey.getdata())
    total = sum(values) or 1
    cx = sum((i % 32) * v for i, v in enumerate(values)) / total / 31
    cy = sum((i // 32) * v for i, v in enumerate(values)) / total / 31
    off = ((cx - 0.5) ** 2 + (cy - 0.5) ** 2) ** 0.5
    score = max(1, min(10, round(10 - 12 * off - 4 * abs(m["contrast"] - 0.35))))
    md = (
        f"# Second opinion from {PROVIDER}\n\n"
        f"`{path}` scores **{score}/10** for balance.\n\n"
        f"- visual centre of mass at ({cx:.2f}, {cy:.2f}) of the frame\n"
        f"- {_verdict(m)}\n\n"
        f"_This opinion came from a paid provider; its price was not known in advance._\n"
    )
    ctx.write("opinion/second-opinion.md", md.encode(), kind="critic.notes",
              media_type="text/markdown", presentation="markdown", title=f"{PROVIDER}: {score}/10")
    # Unknown stays unknown: the provider quotes no price, so both costs are null.
    return kit.Outcome({"provider": PROVIDER, "score": score}, provider=PROVIDER,
                       estimated_cost=None, actual_cost=None)


HANDLERS: dict[str, kit.Handler] = {
    "critic.review": review,
    "critic.second_opinion": second_opinion,
}


def main(argv: list[str]) -> int:
    return kit.run(DESCRIPTOR, HANDLERS, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
