"""ECMA-262 regexes (the JSON Schema ``pattern`` dialect) rewritten for RE2.

A pattern is read once, escape by escape, tracking character classes. ``\\uXXXX``,
``\\u{X...}`` and ``\\cX`` become RE2's ``\\x{...}``; Unicode property escapes get RE2's
names (categories by short alias from Unicode's PropertyValueAliases, scripts by long name,
``ASCII`` as a range; an uncommon four-letter script code is refused with the hint to write
the full name). Back-references and look-around raise :class:`EcmaRefused`, naming the
construct, where it is, and what to write instead.
"""

from __future__ import annotations

__all__ = ["EcmaRefused", "to_re2"]


class EcmaRefused(ValueError):
    """A construct of the pattern has no RE2 equivalent; the message names it."""


#: Unicode general categories: long name (and other aliases) -> the short name RE2 knows.
_CATEGORIES = {
    "Letter": "L", "Cased_Letter": "LC", "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt", "Modifier_Letter": "Lm", "Other_Letter": "Lo",
    "Mark": "M", "Combining_Mark": "M", "Nonspacing_Mark": "Mn", "Spacing_Mark": "Mc",
    "Enclosing_Mark": "Me", "Number": "N", "Decimal_Number": "Nd", "digit": "Nd",
    "Letter_Number": "Nl", "Other_Number": "No", "Punctuation": "P", "punct": "P",
    "Connector_Punctuation": "Pc", "Dash_Punctuation": "Pd", "Open_Punctuation": "Ps",
    "Close_Punctuation": "Pe", "Initial_Punctuation": "Pi", "Final_Punctuation": "Pf",
    "Other_Punctuation": "Po", "Symbol": "S", "Math_Symbol": "Sm", "Currency_Symbol": "Sc",
    "Modifier_Symbol": "Sk", "Other_Symbol": "So", "Separator": "Z", "Space_Separator": "Zs",
    "Line_Separator": "Zl", "Paragraph_Separator": "Zp", "Other": "C", "Control": "Cc",
    "cntrl": "Cc", "Format": "Cf", "Surrogate": "Cs", "Private_Use": "Co",
}  # fmt: skip
_SHORT = {*_CATEGORIES.values()} - {"LC"}
#: Common ISO 15924 script codes -> the script's name (RE2 knows scripts by name).
_SCRIPT_CODES = {
    "Arab": "Arabic", "Armn": "Armenian", "Beng": "Bengali", "Cyrl": "Cyrillic",
    "Deva": "Devanagari", "Ethi": "Ethiopic", "Geor": "Georgian", "Grek": "Greek",
    "Gujr": "Gujarati", "Guru": "Gurmukhi", "Hang": "Hangul", "Hani": "Han", "Hebr": "Hebrew",
    "Hira": "Hiragana", "Kana": "Katakana", "Khmr": "Khmer", "Knda": "Kannada", "Laoo": "Lao",
    "Latn": "Latin", "Mlym": "Malayalam", "Mong": "Mongolian", "Mymr": "Myanmar",
    "Sinh": "Sinhala", "Taml": "Tamil", "Telu": "Telugu", "Thaa": "Thaana", "Thai": "Thai",
    "Tibt": "Tibetan", "Zinh": "Inherited", "Zyyy": "Common",
}  # fmt: skip
_INSTEAD = {
    "lookahead": "match the allowed text directly, or move the condition into the schema "
    "(allOf with a second pattern for (?=...), not: {pattern: ...} for (?!...))",
    "lookbehind": "match the allowed text directly, or move the condition into the schema "
    "(allOf with a second pattern, or not: {pattern: ...})",
    "back-reference": "repeat the group's pattern instead of referring to it, or compare "
    "the values in the module",
}
_LOOKS = {"(?=": "lookahead", "(?!": "lookahead", "(?<=": "lookbehind", "(?<!": "lookbehind"}


def _refuse(pattern: str, construct: str, at: int, text: str) -> EcmaRefused:
    return EcmaRefused(
        f"pattern {pattern!r} uses a {construct} ({text!r} at position {at}), which RE2, the "
        f"host's linear-time regex engine, cannot run; {_INSTEAD[construct]}"
    )


def to_re2(pattern: str) -> str:
    """``pattern`` (ECMA-262) in RE2 syntax, or :class:`EcmaRefused` naming what cannot be.

    Examples
    --------
    >>> to_re2(r"^\\p{Letter}+\\u00e9$")
    '^\\\\p{L}+\\\\x{00e9}$'
    """
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            text, i = _escape(pattern, i, in_class)
            out.append(text)
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        elif char == "(" and not in_class:
            look = next((k for k in _LOOKS if pattern.startswith(k, i)), None)
            if look:
                raise _refuse(pattern, _LOOKS[look], i, look)
            if pattern.startswith("(?<", i):  # ECMA's named group is RE2's (?P<name>
                out.append("(?P<")
                i += 3
                continue
        out.append(char)
        i += 1
    return "".join(out)


def _escape(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """The RE2 text for the escape at ``pattern[i]`` (a backslash) and the index after it."""
    kind = pattern[i + 1]
    if kind == "u":
        if pattern.startswith("{", i + 2) and "}" in pattern[i + 3 :]:
            end = pattern.index("}", i + 3)
            return f"\\x{{{pattern[i + 3 : end]}}}", end + 1
        digits = pattern[i + 2 : i + 6]
        if len(digits) == 4 and all(c in "0123456789abcdefABCDEF" for c in digits):
            return f"\\x{{{digits}}}", i + 6
    if kind == "c" and i + 2 < len(pattern) and pattern[i + 2].isascii() \
            and pattern[i + 2].isalpha():  # fmt: skip
        return f"\\x{{{ord(pattern[i + 2]) % 32:02x}}}", i + 3
    if kind in "123456789" and not in_class:
        raise _refuse(pattern, "back-reference", i, pattern[i : i + 2])
    if kind == "k" and pattern.startswith("<", i + 2):
        end = pattern.find(">", i)
        raise _refuse(pattern, "back-reference", i, pattern[i : end + 1 if end > 0 else i + 3])
    if kind in "pP" and pattern.startswith("{", i + 2) and "}" in pattern[i + 3 :]:
        end = pattern.index("}", i + 3)
        return _property(pattern, pattern[i + 3 : end], kind == "P", in_class), end + 1
    return pattern[i : i + 2], i + 2


def _property(pattern: str, body: str, negated: bool, in_class: bool) -> str:
    """A Unicode property escape's RE2 form (``negated``: ``\\P``)."""
    name, _, value = body.partition("=")
    if value:
        if name in {"General_Category", "gc"}:
            short = _category(value)
        elif name in {"Script", "sc"}:
            short = _SCRIPT_CODES.get(value, value)
        else:
            raise EcmaRefused(
                f"pattern {pattern!r} uses the property {body!r}, which has no RE2 "
                "equivalent (RE2 knows general categories and scripts, not script "
                "extensions); write \\p{Script=...} or a character class instead"
            )
    elif name in {"ASCII", "Any"}:
        short = name
    else:
        short = _category(name) if name in _CATEGORIES or name in _SHORT else ""
        if not short:
            raise EcmaRefused(
                f"pattern {pattern!r} uses the property \\p{{{name}}}, which RE2 cannot "
                "evaluate (it knows general categories such as \\p{Letter} and scripts such "
                "as \\p{Script=Greek}, not binary properties); write a general category or "
                "a character class instead"
            )
    return _spelled(pattern, short, negated, in_class)


def _category(value: str) -> str:
    return _CATEGORIES.get(value, value)


def _spelled(pattern: str, short: str, negated: bool, in_class: bool) -> str:
    """``\\p{short}`` as RE2 writes it (``LC`` and ``ASCII`` as classes RE2 has)."""
    parts = {"LC": r"\p{Lu}\p{Ll}\p{Lt}", "ASCII": r"\x00-\x7f"}.get(short)
    if parts is None:
        return f"\\{'P' if negated else 'p'}{{{short}}}"
    if not in_class:
        return f"[{'^' if negated else ''}{parts}]"
    if negated:
        raise EcmaRefused(
            f"pattern {pattern!r} negates \\p{{{short}}} inside a character class, which RE2 "
            f"cannot express; write the negated class [^...] instead"
        )
    return parts
