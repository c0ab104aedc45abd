"""The program language's whitelist: the operators it takes, the names it reserves, why it refuses the rest."""

from __future__ import annotations

import ast
import re

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
BINOPS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Pow: "**",
    ast.MatMult: "@",
    ast.BitAnd: "&",
    ast.BitOr: "|",
}
CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
RESERVED = {"torch", "range", "True", "False", "None"}
WHY_NOT = {
    ast.BitXor: "'^' is bitwise xor in Python; write powers as '**' (x**2)",
    ast.FloorDiv: "'//' (floor division) has no derivative; use '/'",
    ast.LShift: "Shifts are not supported",
    ast.RShift: "Shifts are not supported",
}
NODE_WORDS = {
    ast.Lambda: "Lambdas are not part of the language",
    ast.ListComp: "Comprehensions are not part of the language",
    ast.SetComp: "Comprehensions are not part of the language",
    ast.DictComp: "Comprehensions are not part of the language",
    ast.GeneratorExp: "Generator expressions are not part of the language",
    ast.NamedExpr: "':=' (walrus) is not part of the language; use a separate assignment",
    ast.JoinedStr: "Strings are not part of the language; programs hold numbers, names and calls",
    ast.Starred: "'*' unpacking is not part of the language",
    ast.Import: "Imports are not part of the language",
    ast.ImportFrom: "Imports are not part of the language",
    ast.FunctionDef: "Defining functions is not part of the language",
    ast.ClassDef: "Classes are not part of the language",
    ast.Await: "'await' is not part of the language",
    ast.Yield: "'yield' is not part of the language",
    ast.IfExp: "'a if c else b' is not supported; use an if statement",
    ast.List: "List literals are not part of programs; give values with --NAME VALUE",
    ast.Dict: "Dict literals are not part of the language",
    ast.Set: "Set literals are not part of the language",
    ast.Slice: "Slices are not part of the language",
    ast.AsyncFunctionDef: "Defining functions is not part of the language",
    ast.Return: "'return' is not part of the language: the last statement is the output",
    ast.Delete: "'del' is not part of the language",
    ast.Global: "'global' is not part of the language",
    ast.Nonlocal: "'nonlocal' is not part of the language",
    ast.With: "'with' is not part of the language",
    ast.AsyncWith: "'with' is not part of the language",
    ast.AsyncFor: "'async for' is not part of the language",
    ast.Try: "'try' is not part of the language",
    ast.Raise: "'raise' is not part of the language",
    ast.Assert: "'assert' is not part of the language",
    ast.Break: "'break' is not part of the language; loops end by their condition or range",
    ast.Continue: "'continue' is not part of the language",
    ast.Match: "'match' is not part of the language; use if statements",
    ast.YieldFrom: "'yield' is not part of the language",
}
if hasattr(ast, "TryStar"):  # Python 3.11+
    NODE_WORDS[ast.TryStar] = "'try' is not part of the language"


# imports pasted code starts with that name what the language already has: torch, F, math (nothing runs)
KNOWN_IMPORTS = {("torch", None), ("math", None), ("torch.nn.functional", "F")}


def names_the_namespace(s: ast.stmt) -> bool:
    """`import torch`, `import math`, `import torch.nn.functional as F`: statements with nothing to do."""
    return isinstance(s, ast.Import) and all((a.name, a.asname) in KNOWN_IMPORTS for a in s.names)
