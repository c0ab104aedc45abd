"""How each front end spells an option, for the texts that point to one (notes, reasons, the report).

A run asked for on the command line says `--grad` and `--dtype float64`; one asked for from Python (the
API, a notebook) says `gradient=` and `dtype="float64"`, the keywords of `explore()`. The library words
its texts with `option(surface, key, value)`; the Request says which surface asked (`Request.surface`).
"""

from __future__ import annotations

CLI, API = "cli", "api"

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
