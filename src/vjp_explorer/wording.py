"""How each front end spells an option, for the texts that point to one (notes, reasons, the report).

A run asked for on the command line says `--grad` and `--dtype float64`; one asked for from Python (the
API, a notebook) says `gradient=` and `dtype="float64"`, the keywords of `explore()`. The library words
its texts with `option(surface, key, value)`; the Request says which surface asked (`Request.surface`).
"""

from __future__ import annotations

import re

CLI, API = "cli", "api"
SNIPPET = "snippet"  # a pasted snippet: no option sets its dtype, its own code does

# key -> (the command line's option, explore()'s keyword); a value follows each, as that surface writes it
_SPELLING = {
    "grad": ("--grad", "gradient"),
    "upstream": ("--upstream", "upstream"),
    "seed": ("--seed", "seed"),
    "dtype": ("--dtype", "dtype"),
    "backward_calls": ("--backward-calls", "backward_calls"),
    "limit": ("--limit", "limits"),
}
# switches: the command line's flag, and the keyword with the value that does the same
_SWITCHES = {
    "no_symbolic": ("--no-symbolic", "symbolic=False"),
    "no_retain_graph": ("--no-retain-graph", "retain_graph=False"),
    "full": ("--full", "the result's arrays"),
    "json_full": ("--json --full", "r.to_dict(full=True)"),
}
PLACEHOLDERS = {"N", "S", "V"}  # stand for a number the user picks: never quoted


def option(surface: str, key: str, value: str | None = None) -> str:
    """`--dtype float64` or `dtype="float64"`; `--limit steps=N` or `limits=Limits(steps=N)`; `--grad` or
    `gradient=` with no value; a switch (`no_symbolic`) as `--no-symbolic` or `symbolic=False`."""
    if key in _SWITCHES:
        return _SWITCHES[key][surface == API]
    flag, keyword = _SPELLING[key]
    if surface != API:
        return flag if value is None else f"{flag} {value}"
    if value is None:
        return f"{keyword}="
    if key == "limit":
        return f"limits=Limits({value})"
    if value in PLACEHOLDERS or _number(value):
        return f"{keyword}={value}"
    return f'{keyword}="{value}"'


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# The engine and the language word a few of their texts (a budget's reason, a limit error, a probe's note)
# without knowing who asked: they spell the option as the command line does. For a run asked from Python,
# api_words() turns exactly those spellings into the keywords of explore(), at the API's boundary.
_KEYWORD = {"grad": "gradient"}
_TO_KEYWORDS = (
    (re.compile(r"--limit (\w+)=(\w+)"), r"limits=Limits(\1=\2)"),
    (re.compile(r"--max-jacobian N\b"), "limits=Limits(jacobian_entries=N)"),
    (re.compile(r"--max-jacobian\b"), "limits=Limits(jacobian_entries=...)"),
    (re.compile(r"--dtype (float64|float32)"), r'dtype="\1"'),
    (re.compile(r"--grad (ones|basis|random|e\d+|e\[[\d,]+\]|-?[\d.][\d.,e-]*)"), r'gradient="\1"'),
    (re.compile(r"--seed (N|\d+)"), r"seed=\1"),
    (re.compile(r"--backward-calls (N|\d+)"), r"backward_calls=\1"),
    (re.compile(r"--output (\w+)"), r'output="\1"'),
    (re.compile(r"--no-retain-graph\b"), "retain_graph=False"),
    (re.compile(r"--no-symbolic\b"), "symbolic=False"),
    (re.compile(r"--(grad|upstream|seed|dtype|device|output)\b"), lambda m: f"{_KEYWORD.get(m[1], m[1])}="),
)


def api_words(text: str | None) -> str | None:
    """A text spelled for the command line, with its options named as explore()'s keywords."""
    if not text or "--" not in text:
        return text
    for pattern, keyword in _TO_KEYWORDS:
        text = pattern.sub(keyword, text)
    return text
