"""Demo module ``gallery``: generative images, an image grid and a pipeline diagram.

Every capability is local and free (``cost_known`` true, ``actual_cost`` 0) and deterministic:
the same input writes the same bytes, so saved notebook outputs compare stably.
Needs Pillow, which the interpreter in the ``module`` shebang provides.
"""

from __future__ import annotations

import io
import random
import sys
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

if TYPE_CHECKING:
    from murmur_nb._demo.modules import _kit as kit
else:  # the installed module folder carries its own copy of the kit
    import _kit as kit

from PIL import Image, ImageDraw, ImageFont

MODULE = "gallery"

PALETTES: dict[str, list[tuple[int, int, int]]] = {
    "dusk": [(24, 32, 72), (64, 52, 120), (168, 80, 112), (240, 140, 80), (252, 206, 120)],
    "forest": [(20, 48, 32), (44, 96, 52), (110, 140, 60), (160, 120, 70), (220, 210, 150)],
    "ember": [(40, 8, 8), (140, 20, 20), (220, 70, 30), (250, 160, 40), (255, 236, 120)],
    "mono": [(16, 16, 16), (70, 70, 70), (130, 130, 130), (190, 190, 190), (245, 245, 245)],
}

_IMAGE_SCHEMA = {
    "$schema": kit.SCHEMA_DIALECT,
    "title": "PNG image",
    "description": "A PNG file; rendered as an image or, with the image_grid hint, in a grid.",
    "type": "string",
    "contentMediaType": "image/png",
}

DESCRIPTOR: dict[str, Any] = {
    "module": MODULE,
    "name": "Gallery",
    "version": "1.0.0",
    "protocol_versions": [kit.PROTOCOL_ID],
    "capabilities": [
        kit.capability(
            "gallery.thumbs",
            "Thumbnail grid",
            "Paint N small generative images, shown together as one grid.",
            artifacts=["gallery.image"],
            skills=["gallery.palettes"],
        ),
        kit.capability(
            "gallery.poster",
            "Poster",
            "Paint one titled poster image.",
            artifacts=["gallery.image"],
            skills=["gallery.palettes"],
        ),
        kit.capability(
            "gallery.diagram",
            "Pipeline diagram",
            "Draw named steps as a flowchart: SVG, Mermaid and Graphviz DOT.",
            artifacts=["gallery.svg", "gallery.graph_source"],
        ),
    ],
    "request_schemas": {
        "gallery.thumbs.request": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "count": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 16,
                    "default": 4,
                    "description": "How many images to paint.",
                },
                "size": {
                    "type": "integer",
                    "minimum": 32,
                    "maximum": 512,
                    "default": 160,
                    "description": "Edge length of each square image, in pixels.",
                },
                "seed": {
                    "type": "integer",
                    "minimum": 0,
                    "default": 7,
                    "description": "Chooses the shapes; same seed, same images.",
                },
                "palette": {
                    "type": "string",
                    "enum": sorted(PALETTES),
                    "default": "dusk",
                    "description": "Colour palette.",
                },
            },
            "additionalProperties": False,
        },
        "gallery.poster.request": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "title": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 40,
                    "default": "murmur-nb",
                    "description": "Text painted on the poster.",
                },
                "palette": {"type": "string", "enum": sorted(PALETTES), "default": "ember"},
                "width": {"type": "integer", "minimum": 64, "maximum": 1024, "default": 480},
                "height": {"type": "integer", "minimum": 64, "maximum": 1024, "default": 270},
            },
            "additionalProperties": False,
        },
        "gallery.diagram.request": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "title": {"type": "string", "maxLength": 60, "default": "Artifact handoff"},
                "steps": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1, "maxLength": 24},
                    "minItems": 2,
                    "maxItems": 8,
                    "default": ["gallery.thumbs", "host.stage", "critic.review"],
                    "description": "Step names, drawn left to right.",
                },
            },
            "additionalProperties": False,
        },
    },
    "result_schemas": {
        "gallery.thumbs.result": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "images": {"type": "integer"},
                "size": {"type": "integer"},
                "palette": {"type": "string"},
            },
            "required": ["images", "size", "palette"],
        },
        "gallery.poster.result": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {"width": {"type": "integer"}, "height": {"type": "integer"}},
            "required": ["width", "height"],
        },
        "gallery.diagram.result": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {"nodes": {"type": "integer"}, "edges": {"type": "integer"}},
            "required": ["nodes", "edges"],
        },
    },
    "artifact_schemas": {
        "gallery.image": _IMAGE_SCHEMA,
        "gallery.svg": {
            "$schema": kit.SCHEMA_DIALECT,
            "title": "SVG diagram",
            "type": "string",
            "contentMediaType": "image/svg+xml",
        },
        "gallery.graph_source": {
            "$schema": kit.SCHEMA_DIALECT,
            "title": "Diagram source text (Mermaid or Graphviz DOT)",
            "type": "string",
        },
    },
    "agent_overlays": [
        {
            "id": "gallery.overview",
            "title": "When to use the gallery",
            "path": "overlays/gallery.md",
            "digest": "sha256:4112c37ec5a14eb758aee92dd46943c3e75797a6dfe0ce7375c2859eebdf83fa",
            "tokens": 90,
        }
    ],
    "skills": [
        {
            "id": "gallery.palettes",
            "title": "Palettes",
            "summary": "The four palettes and how seed and palette combine.",
            "path": "skills/palettes.md",
            "digest": "sha256:4afcd05f648ee4ac56468667d4059c661735817328aa6948457b77f97dd2a707",
            "tokens": 100,
        }
    ],
    "permissions": {
        "filesystem_read": [],
        "filesystem_write": ["out"],
        "network": [],
        "credentials": [],
        "paid_providers": [],
        "publish": False,
        "subprocess": [],
    },
    "requirements": [],
}


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _mix(a: tuple[int, int, int], b: tuple[int, int, int], t: float) -> tuple[int, int, int]:
    return (
        round(a[0] + (b[0] - a[0]) * t),
        round(a[1] + (b[1] - a[1]) * t),
        round(a[2] + (b[2] - a[2]) * t),
    )


def paint(seed: int, size: int, palette: str) -> Image.Image:
    """One generative image: a vertical gradient with overlapping translucent shapes."""
    colours = PALETTES[palette]
    rng = random.Random(seed)
    image = Image.new("RGB", (size, size))
    draw = ImageDraw.Draw(image)
    top, bottom = colours[0], colours[1]
    for row in range(size):
        draw.line([(0, row), (size, row)], fill=_mix(top, bottom, row / max(size - 1, 1)))
    layer = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    shapes = ImageDraw.Draw(layer)
    for _ in range(rng.randint(4, 9)):
        colour = (*colours[rng.randint(2, len(colours) - 1)], rng.randint(110, 220))
        x, y = rng.uniform(-0.2, 1.0) * size, rng.uniform(-0.2, 1.0) * size
        w = rng.uniform(0.15, 0.6) * size
        h = w if rng.random() < 0.5 else rng.uniform(0.15, 0.6) * size
        if rng.random() < 0.6:
            shapes.ellipse([x, y, x + w, y + h], fill=colour)
        else:
            shapes.polygon([(x, y + h), (x + w / 2, y), (x + w, y + h)], fill=colour)
    return Image.alpha_composite(image.convert("RGBA"), layer).convert("RGB")


def thumbs(ctx: kit.Context) -> kit.Outcome:
    count = int(ctx.input.get("count", 4))
    size = int(ctx.input.get("size", 160))
    seed = int(ctx.input.get("seed", 7))
    palette = str(ctx.input.get("palette", "dusk"))
    if palette not in PALETTES:
        raise kit.Failure("invalid_input", f"unknown palette {palette!r}; use {sorted(PALETTES)}")
    for i in range(1, count + 1):
        ctx.write(
            f"thumbs/thumb-{i:02d}.png",
            _png(paint(seed * 1000 + i, size, palette)),
            kind="gallery.image",
            media_type="image/png",
            presentation="image_grid",
            title=f"Thumb {i} of {count} ({palette}, seed {seed})",
        )
    return kit.Outcome(
        {"images": count, "size": size, "palette": palette}, estimated_cost=0.0, actual_cost=0.0
    )


def poster(ctx: kit.Context) -> kit.Outcome:
    title = str(ctx.input.get("title", "murmur-nb"))
    palette = str(ctx.input.get("palette", "ember"))
    width = int(ctx.input.get("width", 480))
    height = int(ctx.input.get("height", 270))
    if palette not in PALETTES:
        raise kit.Failure("invalid_input", f"unknown palette {palette!r}; use {sorted(PALETTES)}")
    art = paint(len(title) * 7919 + sum(map(ord, title)), max(width, height), palette)
    image = art.crop((0, 0, width, height))
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=max(12, height // 6))
    box = draw.textbbox((0, 0), title, font=font)
    x = (width - (box[2] - box[0])) // 2
    y = (height - (box[3] - box[1])) // 2
    draw.text((x + 2, y + 2), title, font=font, fill=(0, 0, 0))
    draw.text((x, y), title, font=font, fill=(255, 255, 255))
    ctx.write(
        "poster.png",
        _png(image),
        kind="gallery.image",
        media_type="image/png",
        presentation="image",
        title=f"Poster: {title}",
    )
    return kit.Outcome(
        {"width": width, "height": height}, estimated_cost=0.0, actual_cost=0.0
    )


def _svg(title: str, steps: list[str]) -> str:
    box_w, box_h, gap, pad = 150, 48, 46, 20
    width = pad * 2 + len(steps) * box_w + (len(steps) - 1) * gap
    height = 130
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
        f"<title>{escape(title)}</title>",
        '<defs><marker id="arrow" markerWidth="10" markerHeight="8" refX="9" refY="4" '
        'orient="auto"><path d="M0,0 L10,4 L0,8 z" fill="#444"/></marker></defs>',
        f'<rect width="{width}" height="{height}" fill="#fbfaf7"/>',
        f'<text x="{pad}" y="28" font-size="16" font-weight="bold" fill="#222">'
        f"{escape(title)}</text>",
    ]
    y = 56
    for i, step in enumerate(steps):
        x = pad + i * (box_w + gap)
        parts.append(
            f'<rect x="{x}" y="{y}" width="{box_w}" height="{box_h}" rx="8" '
            f'fill="#e8eefc" stroke="#3557b7" stroke-width="1.5"/>'
        )
        parts.append(
            f'<text x="{x + box_w // 2}" y="{y + box_h // 2 + 5}" font-size="13" '
            f'text-anchor="middle" fill="#1b2a55">{escape(step)}</text>'
        )
        if i:
            x0 = x - gap + 2
            parts.append(
                f'<line x1="{x0}" y1="{y + box_h // 2}" x2="{x - 3}" y2="{y + box_h // 2}" '
                'stroke="#444" stroke-width="1.5" marker-end="url(#arrow)"/>'
            )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def diagram(ctx: kit.Context) -> kit.Outcome:
    title = str(ctx.input.get("title", "Artifact handoff"))
    raw_steps = ctx.input.get("steps", ["gallery.thumbs", "host.stage", "critic.review"])
    steps = [str(s) for s in raw_steps] if isinstance(raw_steps, list) else []
    if len(steps) < 2:
        raise kit.Failure("invalid_input", "'steps' needs at least two step names")
    mermaid = ["flowchart LR"]
    mermaid += [f'    s{i}["{_quote(step)}"]' for i, step in enumerate(steps)]
    mermaid += [f"    s{i - 1} --> s{i}" for i in range(1, len(steps))]
    dot = [f'digraph "{_quote(title)}" {{', "    rankdir=LR;", "    node [shape=box];"]
    dot += [f'    s{i} [label="{_quote(step)}"];' for i, step in enumerate(steps)]
    dot += [f"    s{i - 1} -> s{i};" for i in range(1, len(steps))]
    dot.append("}")
    ctx.write(
        "diagram/pipeline.svg",
        _svg(title, steps).encode(),
        kind="gallery.svg",
        media_type="image/svg+xml",
        presentation="diagram",
        title=title,
    )
    ctx.write(
        "diagram/pipeline.mmd",
        ("\n".join(mermaid) + "\n").encode(),
        kind="gallery.graph_source",
        media_type="text/vnd.mermaid",
        presentation="diagram",
        title=f"{title} (Mermaid)",
        artifact_id="pipeline-mermaid",
    )
    ctx.write(
        "diagram/pipeline.dot",
        ("\n".join(dot) + "\n").encode(),
        kind="gallery.graph_source",
        media_type="text/vnd.graphviz",
        presentation="diagram",
        title=f"{title} (Graphviz)",
        artifact_id="pipeline-dot",
    )
    return kit.Outcome(
        {"nodes": len(steps), "edges": len(steps) - 1}, estimated_cost=0.0, actual_cost=0.0
    )


HANDLERS: dict[str, kit.Handler] = {
    "gallery.thumbs": thumbs,
    "gallery.poster": poster,
    "gallery.diagram": diagram,
}


def main(argv: list[str]) -> int:
    return kit.run(DESCRIPTOR, HANDLERS, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
