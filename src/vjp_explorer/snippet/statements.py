"""The snippet statements that manage state around a block: `with`, `try` and the imports."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from . import whitelist as W
from .names import Module, module_attr, refuse
from .runtime import Scope, SnippetRaised

if TYPE_CHECKING:
    from .interp import Interpreter


def run_with(it: Interpreter, s: ast.With, scope: Scope) -> None:
    import torch

    managers = []
    for item in s.items:
        cm = it.eval(item.context_expr, scope)
        if not isinstance(
            cm,
            (
                torch.no_grad,
                torch.enable_grad,
                torch.set_grad_enabled,
                torch.inference_mode,
                torch.autograd.detect_anomaly,
            ),
        ):
            raise refuse(
                "This `with` (only torch.no_grad(), torch.enable_grad(), torch.set_grad_enabled(b), "
                "torch.inference_mode() and torch.autograd.detect_anomaly() are)"
            )
        value = it.real(cm.__enter__, node=item.context_expr)
        if item.optional_vars is not None:
            it.assign(item.optional_vars, value, scope)
        managers.append(cm)
    try:
        it.exec_block(s.body, scope)
    finally:
        for cm in reversed(managers):
            cm.__exit__(None, None, None)


def run_try(it: Interpreter, s: ast.Try, scope: Scope) -> None:
    try:
        try:
            it.exec_block(s.body, scope)
        except SnippetRaised as raised:
            for handler in s.handlers:
                kinds = it.eval(handler.type, scope) if handler.type is not None else BaseException
                kinds = kinds if isinstance(kinds, tuple) else (kinds,)
                if not all(isinstance(k, type) and issubclass(k, BaseException) for k in kinds):
                    raise refuse("An except clause that names something other than an exception class") from None
                if isinstance(raised.exc, kinds):
                    if handler.name:
                        scope.vars[handler.name] = raised.exc
                    it.exec_block(handler.body, scope)
                    break
            else:
                raise
        else:
            it.exec_block(s.orelse, scope)
    finally:
        it.exec_block(s.finalbody, scope)


def run_import(it: Interpreter, s: ast.Import | ast.ImportFrom, scope: Scope) -> None:
    if isinstance(s, ast.Import):
        for alias in s.names:
            if alias.name not in W.IMPORTABLE_MODULES:
                raise refuse(f"import {alias.name}", hint=_IMPORT_HINT)
            if alias.asname:
                scope.vars[alias.asname] = Module(alias.name)
            else:
                top = alias.name.split(".")[0]
                scope.vars[top] = Module(top)
        return
    mod = s.module or ""
    if s.level or mod not in W.IMPORTABLE_MODULES:
        raise refuse(f"from {'.' * s.level}{mod} import ...", hint=_IMPORT_HINT)
    for alias in s.names:
        if alias.name == "*":
            raise refuse(f"from {mod} import *", hint="Import the names you use, or the module.")
        full = f"{mod}.{alias.name}"
        value = Module(full) if full in W.IMPORTABLE_MODULES else module_attr(Module(mod), alias.name)
        scope.vars[alias.asname or alias.name] = value


# ------------------------------------------------------------------ assignment

_IMPORT_HINT = (
    "A snippet may import torch, torch.nn, torch.nn.functional, torch.autograd (Variable, Function, grad), numpy, "
    "torch.autograd.functional, torch.func, torch.linalg, torch.special, torch.optim and math."
)
