"""sympy functions for torch's flat steps (floor, ceil, round, trunc, sign): derivative 0 everywhere.

sympy leaves d floor(x)/dx unevaluated and gives sign a DiracDelta; torch's backward gives 0 at every
point, the steps included. These classes say exactly that, so the exact routes agree with torch's
convention and never report the steps as a disagreement. Imported only by the exact rules (sympy).

`eval` below is sympy's `Function.eval` hook, not Python's builtin: sympy calls it with the sympy argument
the exact route built from our own representation (a Symbol or a Number), to fold a number's step at once.
No text is read or evaluated here.
"""

from __future__ import annotations

from typing import Any

import sympy as sp


class _Flat(sp.Function):
    """A step function of one real argument whose derivative torch takes as 0 everywhere."""

    nargs = 1

    def fdiff(self, argindex: int = 1) -> Any:
        return sp.S.Zero

    def _eval_is_real(self) -> Any:
        return self.args[0].is_real


# each class is named as torch names the function: the name is what formulas show (floor(a[0]))
class floor(_Flat):
    @classmethod
    def eval(cls, x: Any) -> Any:
        return sp.floor(x) if x.is_Number else None


class ceil(_Flat):
    @classmethod
    def eval(cls, x: Any) -> Any:
        return sp.ceiling(x) if x.is_Number else None


class trunc(_Flat):
    @classmethod
    def eval(cls, x: Any) -> Any:
        if not x.is_Number:
            return None
        return sp.floor(x) if x >= 0 else sp.ceiling(x)


class round(_Flat):  # torch.round: halves to even
    @classmethod
    def eval(cls, x: Any) -> Any:
        if not x.is_Number:
            return None
        x = sp.Rational(x) if x.is_Float else x  # exact: a Float never equals 1/2 in sympy
        lo = sp.floor(x)
        rest = x - lo
        if rest == sp.Rational(1, 2):
            return lo if lo % 2 == 0 else lo + 1
        return lo if rest < sp.Rational(1, 2) else lo + 1


class sign(_Flat):
    @classmethod
    def eval(cls, x: Any) -> Any:
        return sp.sign(x) if x.is_Number else None
