"""Reject non-ASCII text with a message that names the character and suggests the ASCII one.

Python's parser NFKC-normalises identifiers (`ｌｏｇ` becomes `log`), so a program
could look like one thing and run as another: we accept ASCII only.
"""

from __future__ import annotations

import unicodedata

_SUGGEST = {
    "\u2212": "-",  # MINUS SIGN
    "\u2013": "-",
    "\u2014": "-",
    "\u00d7": "*",  # MULTIPLICATION SIGN
    "\u22c5": "*",
    "\u00b7": "*",
    "\u2219": "*",
    "\u00f7": "/",
    "\u2215": "/",
    "\u00a0": " ",  # NO-BREAK SPACE
    "\u2009": " ",
    "\u202f": " ",
    "\u3000": " ",
    "\u00b2": "**2",
    "\u00b3": "**3",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\uff0c": ",",
    "\u3001": ",",
    "\uff1b": ";",
    "\uff08": "(",
    "\uff09": ")",
}
_INVISIBLE = {"Cf", "Zl", "Zp"}  # zero-width, bidi controls, line/paragraph separators


def first_bad_char(text: str, allow_newlines: bool = True) -> tuple[int, str] | None:
    """The position and a description of the first character we do not accept, or None."""
    for i, ch in enumerate(text):
        if ch.isascii():
            if ch.isprintable() or ch == " " or (allow_newlines and ch in "\n\r\t"):
                continue
            return i, f"the control character {ascii(ch)}; remove it"
        return i, describe(ch)
    return None


def describe(ch: str) -> str:
    """`FULLWIDTH LATIN SMALL LETTER L '\uff4c'; did you mean 'l'?` and the like."""
    name = unicodedata.name(ch, f"U+{ord(ch):04X}")
    cat = unicodedata.category(ch)
    shown = repr(ch) if cat not in _INVISIBLE and not ch.isspace() else f"U+{ord(ch):04X}"
    text = f"the non-ASCII character {name} ({shown})"
    if ch in _SUGGEST:
        return f"{text}; did you mean {_SUGGEST[ch]!r}?"
    if cat in _INVISIBLE:
        return f"{text}, which is invisible; delete it"
    folded = unicodedata.normalize("NFKC", ch)
    if folded.isascii() and folded.strip():
        return f"{text}; did you mean {folded!r}?"
    if cat == "Nd":
        return f"{text}; write digits as ASCII 0-9 (it looks like {unicodedata.digit(ch)})"
    return f"{text}; only ASCII is accepted"
