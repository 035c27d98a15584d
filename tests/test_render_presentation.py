"""resolve_presentation follows the SPEC §2 table exactly; bad hints warn and never break."""

from __future__ import annotations

import html
import warnings
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_render_kit import make_csv

import murmur_nb as mnb

SPEC_TABLE = [
    ("video/mp4", "video"),
    ("video/webm", "video"),
    ("audio/wav", "audio"),
    ("audio/mpeg", "audio"),
    ("image/svg+xml", "diagram"),
    ("image/png", "image"),
    ("image/jpeg", "image"),
    ("application/pdf", "document"),
    ("text/markdown", "markdown"),
    ("text/csv", "table"),
    ("text/tab-separated-values", "table"),
    ("application/vnd.apache.parquet", "table"),
    ("application/json", "json"),
    ("text/plain", "text"),
    ("text/x-python", "text"),
    ("text/vnd.mermaid", "text"),
    ("application/zip", "download"),
    ("application/octet-stream", "download"),
    ("application/geo+json", "download"),
    ("", "download"),
    ("video", "download"),  # no subtype: not `video/*`
    ("image", "download"),
    ("text", "download"),
]


@pytest.mark.parametrize("media_type, expected", SPEC_TABLE)
def test_the_media_type_decides_when_there_is_no_hint(media_type: str, expected: str) -> None:
    assert mnb.resolve_presentation("", media_type) == expected
    assert mnb.resolve_presentation(None, media_type) == expected


def test_media_type_parameters_and_case_are_ignored() -> None:
    assert mnb.resolve_presentation("", "Text/CSV; charset=utf-8") == "table"
    assert mnb.resolve_presentation("", " IMAGE/PNG ") == "image"


@pytest.mark.parametrize(
    "hint, media_type",
    [
        ("timeline", "application/json"),
        ("image_grid", "image/png"),
        ("image_grid", "application/json"),
        ("slides", "application/pdf"),
        ("slides", "text/markdown"),
        ("slides", "application/json"),
        ("table", "application/json"),
        ("diagram", "text/vnd.mermaid"),
        ("diagram", "text/vnd.graphviz"),
        ("diagram", "image/svg+xml"),
        ("download", "video/mp4"),
        ("text", "application/json"),
        ("markdown", "text/plain"),
        ("image", "image/svg+xml"),
        ("document", "application/pdf"),
        ("text", "application/yaml"),
        ("text", "application/x-yaml"),
        ("text", "application/xml"),
        ("text", "application/atom+xml"),
        ("text", "application/ld+json"),
        ("text", "image/svg+xml"),
        ("json", "application/geo+json"),
    ],
)
def test_a_hint_the_file_can_honour_wins_silently(hint: str, media_type: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mnb.resolve_presentation(hint, media_type) == hint


def test_an_unknown_hint_is_ignored_with_a_warning() -> None:
    with pytest.warns(mnb.PresentationWarning, match="unknown presentation hint 'hologram'"):
        assert mnb.resolve_presentation("hologram", "image/png") == "image"


@pytest.mark.parametrize(
    "hint, media_type, expected",
    [
        ("video", "text/csv", "table"),
        ("audio", "video/mp4", "video"),
        ("timeline", "text/csv", "table"),
        ("document", "image/png", "image"),
        ("json", "application/pdf", "document"),
        ("table", "text/markdown", "markdown"),
        ("video", "video", "download"),
        ("markdown", "text", "download"),
    ],
)
def test_a_hint_the_file_cannot_honour_falls_back_with_a_warning(
    hint: str, media_type: str, expected: str
) -> None:
    with pytest.warns(mnb.PresentationWarning, match="cannot be honoured"):
        assert mnb.resolve_presentation(hint, media_type) == expected


@pytest.mark.parametrize(
    "name, media_type, content",
    [
        ("c.yaml", "application/yaml", "name: demo\nsteps: [1, 2]\n"),
        ("c.xml", "application/xml", "<config><step n='1'/></config>\n"),
        ("c.jsonld", "application/ld+json", '{"@context": "https://schema.org"}\n'),
    ],
)
def test_yaml_xml_and_plus_json_files_are_textual(
    tmp_path: Path, name: str, media_type: str, content: str
) -> None:
    """One rule says what is textual: a ``text`` hint shows these files as text, silently;
    without a hint the SPEC table still offers them as a download."""
    path = tmp_path / name
    path.write_text(content)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shown = mnb.render_file(path, media_type, presentation="text")
        plain = mnb.render_file(path, media_type)
    assert shown.primitive == "text"
    assert html.escape(content.splitlines()[0]) in shown.html
    assert plain.primitive == "download"


def test_broken_plus_json_with_a_json_hint_falls_back_to_the_media_type(tmp_path: Path) -> None:
    path = tmp_path / "broken.geojson"
    path.write_text('{"type": "Feature", ')
    with pytest.warns(mnb.PresentationWarning, match="could not show as json: not valid JSON"):
        r = mnb.render_file(path, "application/geo+json", presentation="json")
    assert r.primitive == "download"


def test_rendering_a_csv_with_a_video_hint_draws_a_table_not_a_player(tmp_path: Path) -> None:
    make_csv(tmp_path / "t.csv", rows=3)
    with pytest.warns(mnb.PresentationWarning, match="'video' cannot be honoured"):
        r = mnb.render_file(tmp_path / "t.csv", presentation="video")
    assert r.primitive == "table"
    assert "<video" not in r.html and "<table" in r.html
    assert "note: presentation hint 'video' cannot be honoured" in r.text


_MEDIA = st.sampled_from([mt for mt, _ in SPEC_TABLE] + ["text/vnd.graphviz", "image/gif"])
_HINTS = st.one_of(st.sampled_from(mnb.PRIMITIVES), st.text(max_size=12))


@given(hint=_HINTS, media_type=_MEDIA)
def test_resolution_always_yields_a_primitive_and_warns_exactly_when_it_overrides(
    hint: str, media_type: str
) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        primitive = mnb.resolve_presentation(hint, media_type)
    assert primitive in mnb.PRIMITIVES
    baseline = mnb.resolve_presentation("", media_type)
    if not hint.strip():
        assert not caught and primitive == baseline
    elif caught:
        assert [w.category for w in caught] == [mnb.PresentationWarning]
        assert primitive == baseline
    else:
        assert primitive == hint.strip()
