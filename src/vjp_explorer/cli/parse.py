"""The command line's reading of `--NAME VALUE` for a program's variables, beside the commands' own options.

Click knows only the options a command declares; a program's inputs are named by the program. This command
class takes every `--NAME VALUE` it does not know as a variable, and turns what cannot be one (a mistyped
flag, a program that starts with a minus sign) into a clear problem the command reports.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand


class VariableOptions(TyperCommand):
    """A command that also accepts `--NAME VALUE` for each variable of the program."""

    # Duck-typed on purpose: typer has shipped both real click and a vendored copy of it.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        takes_value: dict[str, bool] = {}
        for p in self.get_params(ctx):
            if getattr(p, "param_type_name", "") == "option":
                for o in [*p.opts, *p.secondary_opts]:
                    takes_value[o] = not getattr(p, "is_flag", False) and not getattr(p, "count", False)
        problems: list[str] = []
        rest: list[str] = []
        found: list[tuple[str, str]] = []
        i = 0
        while i < len(args):
            a = args[i]
            if a == "--":
                rest += args[i:]
                break
            if a.startswith("--") and len(a) > 2:
                name, eq, val = a[2:].partition("=")
                opt = "--" + name
                if opt in takes_value:
                    rest.append(a)
                    if takes_value[opt] and not eq and i + 1 < len(args):
                        rest.append(args[i + 1])
                        i += 1
                    i += 1
                    continue
                if not eq:
                    if (
                        i + 1 >= len(args)
                        or args[i + 1] in takes_value
                        or args[i + 1] == "--"
                        or (name.isidentifier() and _is_option(args[i + 1]))
                    ):
                        # nothing after it, or an option (ours or a variable's): a mistyped flag (--jsn) or a bare
                        # variable; a value never starts with two dashes (a negative number has one). A name
                        # that is no identifier (`---x`, a program read as an option) is reported later
                        problems.append(_valueless(a, name, sorted(o for o in takes_value if o.startswith("--"))))
                        break
                    val = args[i + 1]
                    i += 1
                found.append((name, val))
                i += 1
                continue
            if a.startswith("-") and len(a) > 1 and a[:2] not in takes_value and not a[1:].isalpha():
                # not an option's value (those were taken above): a program that starts with a minus sign
                shown = a if len(a) <= 40 else a[:37] + "..."
                problems.append(
                    f"The program {shown!r} starts with a minus sign, so the command line reads it as an option. "
                    f"Write it in parentheses, '({shown})', or put it last, after --: vjp run --NAME VALUE -- "
                    f"'{shown}'."
                )
                break
            if a.startswith("-") and len(a) > 1 and a[1:2].isalpha() and a[:2] not in takes_value:
                problems.append(f"No such option: {a} (variables are given as --NAME VALUE, with two dashes).")
                break
            rest.append(a)
            i += 1
        ctx.meta["vjp_variables"] = found
        ctx.meta["vjp_argv"] = list(args)  # as given: `vjp live`'s c key reproduces the state as a vjp run command
        ctx.meta["vjp_problems"] = problems
        ctx.meta["vjp_options"] = sorted(o for o in takes_value if o.startswith("--"))
        return super().parse_args(ctx, rest)


def _is_option(arg: str) -> bool:
    """`--json`, `--a`, `--`: an option or the end of options, never a variable's value."""
    return arg.startswith("--")


def _valueless(arg: str, name: str, options: list[str]) -> str:
    """`--jsn` with no value after it: an option mistyped (say which), or a variable without its value."""
    import difflib

    near = difflib.get_close_matches(arg, options, n=1, cutoff=0.75) if len(name) > 2 else []
    if near:
        return f"No such option {arg}; did you mean {near[0]}?"
    return f"{arg} needs a value: {arg} VALUE (or --var {name}=VALUE)."
