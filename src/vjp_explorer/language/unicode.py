"""Reject non-ASCII text with a message that names the character and suggests the ASCII one.

Python's parser NFKC-normalises identifiers (`ｌｏｇ` becomes `log`), so a program
could look like one thing and run as another: we accept ASCII only. The same
goes for values (`١,٢` are Arabic-Indic digits, not 1,2).

`visible` makes a same-length copy of hostile text that is safe to print in an
error marker: no terminal escapes, no bidi overrides, no undecodable bytes.
"""

from __future__ import annotations

import keyword
import unicodedata

_SUGGEST = {
    "\u2212": "-",  # MINUS SIGN
    "\u2010": "-",  # HYPHEN
    "\u2011": "-",  # NON-BREAKING HYPHEN
    "\u2012": "-",  # FIGURE DASH
    "\u2013": "-",  # EN DASH
    "\u2014": "-",  # EM DASH
    "\ufe63": "-",  # SMALL HYPHEN-MINUS
    "\u00d7": "*",  # MULTIPLICATION SIGN
    "\u22c5": "*",  # DOT OPERATOR
    "\u00b7": "*",  # MIDDLE DOT
    "\u2219": "*",  # BULLET OPERATOR
    "\u2217": "*",  # ASTERISK OPERATOR
    "\u00f7": "/",  # DIVISION SIGN
    "\u2215": "/",  # DIVISION SLASH
    "\u2044": "/",  # FRACTION SLASH
    "\u00a0": " ",  # NO-BREAK SPACE
    "\u2009": " ",
    "\u202f": " ",
    "\u3000": " ",
    "\u2264": "<=",
    "\u2265": ">=",
    "\u2260": "!=",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\uff0c": ",",
    "\u3001": ",",
    "\u066b": ".",  # ARABIC DECIMAL SEPARATOR
    "\u066c": ",",  # ARABIC THOUSANDS SEPARATOR
    "\uff1b": ";",
    "\uff08": "(",
    "\uff09": ")",
    "\u2026": "...",
}
# C1 controls, zero-width, bidi controls, line/paragraph separators, private use, unassigned, surrogates
_INVISIBLE = {"Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs"}
_COMBINING = {"Mn", "Me", "Mc"}


def first_bad_char(text: str, allow_newlines: bool = True, comments: bool = False) -> tuple[int, str] | None:
    """The position and a description of the first character we do not accept, or None. With `comments`, a
    `#` comment may hold any printable character (a Chinese or accented comment in pasted code): never a
    control, a bidi override or another invisible one."""
    quote, in_comment = "", False
    for i, ch in enumerate(text):
        if ch == "\n":
            quote, in_comment = "", False
        elif comments and not in_comment:
            if quote and ch == quote:
                quote = ""
            elif not quote and ch in "'\"":
                quote = ch
            elif not quote and ch == "#":
                in_comment = True
        if ch.isascii():
            if ch.isprintable() or (allow_newlines and ch in "\n\r\t"):
                continue
            return i, f"the control character {ascii(ch)}; remove it"
        if in_comment and ch.isprintable() and unicodedata.category(ch) not in _INVISIBLE:
            continue
        return i, describe(ch)
    return None


def describe(ch: str) -> str:
    """`FULLWIDTH LATIN SMALL LETTER L ('ｌ'); did you mean 'l'?` and the like."""
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:
        # how Python decodes a byte that is not UTF-8 (argv, files read with surrogateescape)
        return (
            f"the byte 0x{code - 0xDC00:02X}, which is not valid UTF-8; "
            "the text must be UTF-8 (and ASCII in programs and values)"
        )
    name = unicodedata.name(ch, "")
    cat = unicodedata.category(ch)
    quoted = cat not in _INVISIBLE and cat not in _COMBINING and not ch.isspace()
    if not name:  # C1 controls, private use and unassigned code points have no name
        kind = "control character" if cat == "Cc" else "character"
        text = f"the non-ASCII {kind} U+{code:04X}"
    else:
        text = f"the non-ASCII character {name} ({repr(ch) if quoted else f'U+{code:04X}'})"
    suggestion = _suggest(ch, name, cat)
    if suggestion is not None:
        return f"{text}; did you mean {suggestion!r}?"
    if cat in _INVISIBLE:
        return f"{text}, which is invisible; delete it"
    if cat in _COMBINING:
        return f"{text}, an accent that combines with the character before it; delete it"
    return f"{text}; only ASCII is accepted"


def _suggest(ch: str, name: str, cat: str) -> str | None:
    """The ASCII text the user most likely meant, or None if there is no good guess."""
    if ch in _SUGGEST:
        return _SUGGEST[ch]
    if cat in _INVISIBLE:
        return None
    if ch.isspace():
        return " "
    folded = unicodedata.normalize("NFKC", ch)
    folded = "".join(_SUGGEST.get(c, c) for c in folded)
    if "SUPERSCRIPT" in name and folded.isascii() and folded.strip():
        return "**" + folded  # x⁴ is a power
    if cat == "Nd":
        return str(unicodedata.digit(ch))  # ٣ and ３ are digits, but not ASCII ones
    if folded.isascii() and folded.strip():
        return folded  # ｌ -> l, 𝑥 -> x, ﬁ -> fi
    # é -> e: drop the accents
    bare = "".join(c for c in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(c))
    if bare.isascii() and bare.strip():
        return bare
    # α -> alpha, 𝛥 -> Delta: Greek letters are usually meant as names
    greek = unicodedata.name(folded, "") if len(folded) == 1 else ""
    for prefix, case in (("GREEK SMALL LETTER ", str.lower), ("GREEK CAPITAL LETTER ", str.capitalize)):
        if greek.startswith(prefix) and greek[len(prefix) :].isalpha():
            word = case(greek[len(prefix) :]).replace("amda", "ambda")
            return word + "_" if keyword.iskeyword(word) else word
    return None


def sentence(text: str) -> str:
    """`text` ending in one full stop (or the ? of a suggestion)."""
    return text if text.endswith((".", "?", "!")) else text + "."


def visible(text: str) -> str:
    """`text` with every character that could mislead a terminal replaced, one for one.

    Positions stay valid (the replacement is char-for-char), so an error can draw
    its ^^^ marker on this copy: ESC cannot recolour the terminal, U+202E cannot
    reverse the line, a tab cannot shift the marker, a lone surrogate cannot fail
    to encode.
    """
    out = []
    for ch in text:
        code = ord(ch)
        if ch == "\n" or (ch.isascii() and ch.isprintable()):
            out.append(ch)
        elif ch == "\t":
            out.append(" ")
        elif code < 0x20:
            out.append(chr(0x2400 + code))  # CONTROL PICTURES: ␛, ␀, ␍ ...
        elif code == 0x7F:
            out.append("\u2421")  # ␡
        elif unicodedata.category(ch) in _INVISIBLE | _COMBINING or (ch.isspace() and ch != " "):
            out.append("\ufffd")  # REPLACEMENT CHARACTER
        else:
            out.append(ch)
    return "".join(out)
