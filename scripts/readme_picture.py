"""Make the README's picture from the browser test's screenshot of the tour in JupyterLab.

``scripts/refresh-notebooks`` runs the tour browser test (``tests/test_browser.py``) into a
scratch folder, then this turns its ``browser-tour-grid.png`` (the ModuleBrowser's run of
``gallery.thumbs`` with its result, confinement and image grid) into ``docs/jupyterlab.png``:
900 pixels wide, 256-colour PNG, so the repository stays small.

    python scripts/readme_picture.py SCREENSHOT [OUT]
"""

from __future__ import annotations

import sys
from pathlib import Path

from PIL import Image

WIDTH = 900


def make_picture(screenshot: Path, out: Path) -> None:
    """Scale ``screenshot`` to :data:`WIDTH` pixels and save it, quantized, as ``out``."""
    with Image.open(screenshot) as image:
        rgb = image.convert("RGB")
    height = round(rgb.height * WIDTH / rgb.width)
    small = rgb.resize((WIDTH, height), Image.Resampling.LANCZOS)
    out.parent.mkdir(parents=True, exist_ok=True)
    small.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)


if __name__ == "__main__":
    source = Path(sys.argv[1])
    target = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("docs/jupyterlab.png")
    make_picture(source, target)
    print(f"{target}: {target.stat().st_size / 1024:.0f} KiB")
