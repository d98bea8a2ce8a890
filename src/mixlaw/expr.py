"""Safe filter and derive expressions over a table's columns (``--where``, ``--derive``, ``RunStore.to_frame``).

A user's text is parsed with :mod:`ast` and checked against a small grammar before anything is evaluated; nothing
in it can reach a Python object. The grammar:

- **names**: column names (``n_params``), or any column name in backticks (`` `Training FLOP` ``, ``
  `loss_Pile-CC` ``);
- **literals**: numbers (``1e8``, ``3``, ``True``/``False``) and strings (``'cpt'``, ``"fit"``), and lists or tuples
  of them on one side of ``in``, ``not in``, ``==`` or ``!=`` (``run_id in ['a', 'b']``);
- **comparisons** ``== != < <= > >=``, chained (``1e6 < n_params <= 1e8``), ``in`` / ``not in`` a literal list;
- **boolean operators** ``and or not`` and ``& | ~`` (element-wise; ``&`` and ``|`` bind like ``and`` and ``or``, as
  in :meth:`pandas.DataFrame.query`, so ``a > 1 & b < 2`` means ``(a > 1) and (b < 2)``);
- **arithmetic** ``+ - * / ** %`` and unary ``-``/``+`` on numbers (float64; integer operands give an integer column
  when every result is an integer that float64 holds exactly);
- **functions** ``log log2 log10 log1p exp sqrt abs isnan`` (element-wise), and ``min(x)`` / ``max(x)`` (over the
  column) or ``min(x, by=g)`` / ``max(x, by=g)`` (within each group of ``g``, or of several columns
  ``by=[g, h]``): the final checkpoint of every run is ``step == max(step, by=run_id)``.

Anything else (attribute access, subscripts, ``@`` names, calls of other functions, lambdas, comprehensions, dunder
names, unknown columns) is an :class:`~mixlaw.errors.InputError` of one line that names the offending piece.
Evaluation is vectorised over :class:`pandas.Series`; numeric warnings (``log(-1)``) give NaN quietly.
"""

from __future__ import annotations

import ast
import secrets
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError

__all__ = ["FUNCTIONS", "Expression", "derive_column", "evaluate", "filter_rows", "parse"]

MAX_LENGTH = 100_000  # characters; a list of a few thousand run ids still fits
MAX_DEPTH = 100  # nesting of the expression tree
_ELIDE = 120  # characters of user text echoed in an error

_UNARY_FUNCS: dict[str, Callable[[Any], Any]] = {
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "log1p": np.log1p,
    "exp": np.exp,
    "sqrt": np.sqrt,
    "abs": np.abs,
    "isnan": pd.isna,
}
_REDUCTIONS = ("min", "max")
FUNCTIONS = tuple(sorted((*_UNARY_FUNCS, *_REDUCTIONS)))
_GRAMMAR = (
    "allowed: column names (`any name` in backticks), number and string literals, comparisons, in/not in [list], "
    "and/or/not & | ~, + - * / ** %, " + " ".join(FUNCTIONS)
)

_CMP: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}
_ARITH: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
    ast.Mod: lambda a, b: a % b,
}
_REFUSED: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access",
    ast.Subscript: "subscript",
    ast.Lambda: "lambda",
    ast.ListComp: "comprehension",
    ast.SetComp: "comprehension",
    ast.DictComp: "comprehension",
    ast.GeneratorExp: "comprehension",
    ast.Starred: "starred expression",
    ast.NamedExpr: "assignment expression",
    ast.IfExp: "conditional expression",
    ast.Dict: "dict literal",
    ast.Set: "set literal",
    ast.JoinedStr: "f-string",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.Slice: "slice",
}


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _elide(text: str, n: int = _ELIDE) -> str:
    text = text.replace("\n", " ").replace("\r", " ")
    return text if len(text) <= n else text[: n - 1] + "…"


def _safe_repr(text: str) -> str:
    """``repr`` that never fails to print (lone surrogates escaped)."""
    return repr(_elide(text)).encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True)
class Expression:
    """A checked expression: the parsed tree, the source it came from and the columns it names.

    ``names`` maps the placeholder identifiers of backtick-quoted names to the real column names."""

    text: str
    tree: ast.expr
    names: dict[str, str]
    what: str
    source: str

    def columns(self) -> set[str]:
        """Every column the expression reads."""
        return {self.names.get(n.id, n.id) for n in ast.walk(self.tree) if isinstance(n, ast.Name)} - set(FUNCTIONS)

    def error(self, node: ast.AST | None, message: str, *, hint: bool = False) -> InputError:
        """One line: ``message`` with the offending piece of source at ``{}`` (or appended), and the grammar."""
        piece = ""
        if node is not None:
            seg = ast.get_source_segment(self.source, node) or ""
            for ph, real in self.names.items():
                seg = seg.replace(ph, f"`{real}`")
            piece = _safe_repr(seg) if seg else ""
        msg = message.replace("{}", piece) if "{}" in message else (f"{message} {piece}" if piece else message)
        return InputError(msg + (f" ({_GRAMMAR})" if hint else ""))


def _rewrite(text: str, what: str) -> tuple[str, dict[str, str]]:
    """Backtick names → placeholder identifiers; ``&``/``|`` outside strings → ``and``/``or`` (pandas precedence).

    Refuses ``@`` (pandas' local-variable reference) and triple-quoted strings (which this scanner does not track).
    """
    out: list[str] = []
    names: dict[str, str] = {}
    salt = secrets.token_hex(4)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "'\"":
            if text.startswith(c * 3, i):
                raise InputError("triple-quoted strings are not supported")
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                raise InputError(f"unterminated string starting at character {i + 1}")
            out.append(text[i : j + 1])
            i = j + 1
        elif c == "`":
            j = text.find("`", i + 1)
            if j < 0:
                raise InputError(f"unterminated backtick name at character {i + 1}")
            real = text[i + 1 : j]
            if not real:
                raise InputError(f"empty backtick name at character {i + 1}")
            ph = next((k for k, v in names.items() if v == real), f"_mixlaw_bt_{salt}_{len(names)}")
            names[ph] = real
            out.append(f" {ph} ")
            i = j + 1
        elif c == "@":
            raise InputError(f"'@' (a reference to a Python variable) is not allowed ({_GRAMMAR})")
        elif c == "&":
            out.append(" and ")
            i += 1
        elif c == "|":
            out.append(" or ")
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out), names


def parse(text: str, *, what: str = "--where") -> Expression:
    """Parse and check ``text``; an :class:`InputError` naming the offending piece if it leaves the grammar."""
    if not isinstance(text, str):
        raise InputError(f"expected an expression string for {what}, got {type(text).__name__}")
    if not text.strip():
        raise InputError(f"expected an expression for {what}, got an empty string")
    if len(text) > MAX_LENGTH:
        raise InputError(f"expected an expression of at most {MAX_LENGTH} characters for {what}, got {len(text)}")
    source, names = _rewrite(text, what)
    source = source.strip()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an invalid escape in a string literal is an error, not a warning
            tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        msg = exc.msg if isinstance(exc.msg, str) else "invalid syntax"
        raise InputError(f"not a valid expression ({_elide(msg, 80)})") from None
    except (ValueError, RecursionError, MemoryError, Warning) as exc:
        raise InputError(f"not a valid expression ({type(exc).__name__})") from None
    expr = Expression(text, tree.body, names, what, source)
    _check(expr)
    return expr


def _check(expr: Expression) -> None:
    """Walk the tree iteratively (no recursion limit to hit) and refuse every node outside the grammar."""
    stack: list[tuple[ast.AST, int, str]] = [(expr.tree, 1, "value")]
    while stack:
        node, depth, role = stack.pop()
        if depth > MAX_DEPTH:
            raise expr.error(None, f"nested more than {MAX_DEPTH} levels deep")
        kids: list[ast.AST] = []
        if type(node) in _REFUSED:
            raise expr.error(node, f"{_REFUSED[type(node)]} {{}} is not allowed", hint=True)
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, str) and not _utf8(v):
                raise expr.error(node, "string literal {} is not UTF-8 text (a lone surrogate)")
            if isinstance(v, bool | int | float | str) and not isinstance(v, complex):
                continue
            raise expr.error(node, f"only number and string literals are allowed, got {type(v).__name__} {{}}")
        if isinstance(node, ast.Name):
            if node.id not in expr.names and (node.id.startswith("__") or node.id.endswith("__")):
                raise expr.error(node, "dunder name {} is not allowed")
            if role != "func" and node.id in FUNCTIONS and node.id not in expr.names:
                raise expr.error(node, "function {} must be called, e.g. log(n_params)")
            continue
        if isinstance(node, ast.List | ast.Tuple):
            if role != "list":
                raise expr.error(node, "a list {} is only allowed beside in, not in, == or !=")
            for e in node.elts:
                if isinstance(e, ast.Constant) and isinstance(e.value, str) and not _utf8(e.value):
                    raise expr.error(e, "string literal {} is not UTF-8 text (a lone surrogate)")
                if not (isinstance(e, ast.Constant) and isinstance(e.value, bool | int | float | str)):
                    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub | ast.UAdd):
                        if isinstance(e.operand, ast.Constant) and isinstance(e.operand.value, int | float):
                            continue
                    raise expr.error(e, "a list may hold only number and string literals, got {}")
            continue
        if isinstance(node, ast.BoolOp):
            kids = list(node.values)
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, ast.Not | ast.Invert | ast.USub | ast.UAdd):
                raise expr.error(node, "operator in {} is not allowed", hint=True)
            kids = [node.operand]
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _ARITH:
                raise expr.error(node, f"operator {type(node.op).__name__} in {{}} is not allowed", hint=True)
            kids = [node.left, node.right]
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for k, op in enumerate(node.ops):
                if isinstance(op, ast.Is | ast.IsNot):
                    raise expr.error(node, "'is' in {} is not allowed (use == or !=)")
                b = operands[k + 1]
                if isinstance(op, ast.In | ast.NotIn) and not isinstance(b, ast.List | ast.Tuple):
                    raise expr.error(
                        b, "the right side of in / not in must be a literal list such as ['a', 'b'], got {}"
                    )
            for o in operands:
                is_list = isinstance(o, ast.List | ast.Tuple)
                if is_list:
                    stack.append((o, depth + 1, "list"))
                else:
                    kids.append(o)
        elif isinstance(node, ast.Call):
            fname = node.func.id if isinstance(node.func, ast.Name) else None
            if fname is None or fname in expr.names or fname not in FUNCTIONS:
                what = ast.get_source_segment(expr.source, node.func) or "?"
                raise expr.error(node, f"call of {_safe_repr(what)} is not allowed", hint=True)
            if len(node.args) != 1:
                raise expr.error(node, f"{fname}() takes one argument, got {{}}")
            for kw in node.keywords:
                if fname not in _REDUCTIONS or kw.arg != "by":
                    raise expr.error(node, f"{fname}() takes no keyword {kw.arg!r}" if kw.arg else "** is not allowed")
                by = kw.value.elts if isinstance(kw.value, ast.List | ast.Tuple) else [kw.value]
                if not by or not all(isinstance(b, ast.Name) and b.id not in FUNCTIONS for b in by):
                    raise expr.error(kw.value, f"{fname}(..., by=...) takes a column name or a list of them, got {{}}")
                kids.extend(by)
            kids.append(node.args[0])
        else:
            raise expr.error(node, f"{type(node).__name__} {{}} is not allowed", hint=True)
        for kid in kids:
            stack.append((kid, depth + 1, "value"))


# --------------------------------------------------------------------------------------------------- evaluation


def _is_bool(v: Any) -> bool:
    if isinstance(v, pd.Series):
        return pd.api.types.is_bool_dtype(v.dtype)
    return isinstance(v, bool | np.bool_)


def _is_num(v: Any) -> bool:
    if isinstance(v, pd.Series):
        return pd.api.types.is_numeric_dtype(v.dtype) and not pd.api.types.is_bool_dtype(v.dtype)
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool | np.bool_)


def _is_int(v: Any) -> bool:
    if isinstance(v, pd.Series):
        return pd.api.types.is_integer_dtype(v.dtype)
    return isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)


def _float(v: Any) -> Any:
    return v.astype(np.float64) if isinstance(v, pd.Series) else np.float64(v)


def _literal(v: Any) -> Any:
    if isinstance(v, bool | str):
        return v
    if isinstance(v, int):
        return np.int64(v) if -(2**63) <= v < 2**63 else np.float64(float(v))  # float() of a huge int: OverflowError
    return np.float64(v)


def _as_bool(v: Any) -> Any:
    if isinstance(v, pd.Series) and v.dtype != bool and pd.api.types.is_bool_dtype(v.dtype):
        return v.fillna(False).astype(bool)  # a nullable boolean: NA counts as False, as in DataFrame.query
    return v


class _Evaluator:
    def __init__(self, expr: Expression, frame: pd.DataFrame) -> None:
        self.expr, self.frame = expr, frame

    def column(self, node: ast.Name) -> pd.Series:
        name = self.expr.names.get(node.id, node.id)
        if name not in self.frame.columns:
            cols = ", ".join(map(str, list(self.frame.columns)[:30]))
            raise self.expr.error(node, f"unknown column {{}} (columns: {_elide(cols, 300)})")
        col = self.frame[name]
        if isinstance(col, pd.DataFrame):
            raise self.expr.error(node, "the table has several columns named {}")
        return col

    def literals(self, node: ast.List | ast.Tuple) -> list[Any]:
        out = []
        for e in node.elts:
            if isinstance(e, ast.UnaryOp):
                v = e.operand.value  # type: ignore[attr-defined]
                out.append(_literal(-v if isinstance(e.op, ast.USub) else v))
            else:
                out.append(_literal(e.value))  # type: ignore[attr-defined]
        return out

    def ev(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return _literal(node.value)
        if isinstance(node, ast.Name):
            return self.column(node)
        if isinstance(node, ast.BoolOp):
            vals = [self.logical(v, node) for v in node.values]
            out = vals[0]
            for v in vals[1:]:
                out = (out & v) if isinstance(node.op, ast.And) else (out | v)
            return out
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not | ast.Invert):
                v = self.logical(node.operand, node)
                return ~v if isinstance(v, pd.Series) else not v
            v = self.numeric(node.operand, node)
            return -v if isinstance(node.op, ast.USub) else +v
        if isinstance(node, ast.BinOp):
            a, b = self.numeric(node.left, node), self.numeric(node.right, node)
            res = _ARITH[type(node.op)](_float(a), _float(b))
            if _is_int(a) and _is_int(b) and type(node.op) is not ast.Div:
                arr = np.asarray(res, dtype=np.float64)
                if np.all(np.isfinite(arr)) and np.all(np.abs(arr) <= 2**53) and np.all(arr == np.round(arr)):
                    res = res.astype(np.int64) if isinstance(res, pd.Series) else np.int64(res)
            return res
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.expr.error(node, "{} is not allowed", hint=True)  # unreachable after _check

    def logical(self, node: ast.AST, parent: ast.AST) -> Any:
        v = _as_bool(self.ev(node))
        if not _is_bool(v):
            raise self.expr.error(node, "expected a true/false operand of and/or/not/&/|/~, got {}")
        return v

    def numeric(self, node: ast.AST, parent: ast.AST) -> Any:
        v = self.ev(node)
        if not _is_num(v):
            raise self.expr.error(node, "expected a number operand of an arithmetic operator, got {}")
        return v

    def compare(self, node: ast.Compare) -> Any:
        operands = [node.left, *node.comparators]
        out: Any = None
        left: Any = None
        for k, op in enumerate(node.ops):
            a_node, b_node = operands[k], operands[k + 1]
            a_list, b_list = isinstance(a_node, ast.List | ast.Tuple), isinstance(b_node, ast.List | ast.Tuple)
            if k == 0 and not a_list:
                left = self.ev(a_node)
            right = None if b_list else self.ev(b_node)
            if a_list or b_list:
                if a_list and b_list:
                    raise self.expr.error(node, "compare a column with a list, not two lists, in {}")
                if not isinstance(op, ast.In | ast.NotIn | ast.Eq | ast.NotEq) or (
                    a_list and isinstance(op, ast.In | ast.NotIn)
                ):
                    raise self.expr.error(node, "a list is only allowed beside in, not in, == or !=, in {}")
                values = self.literals(b_node if b_list else a_node)  # type: ignore[arg-type]
                val = right if a_list else left
                hit = val.isin(values) if isinstance(val, pd.Series) else (val in values)
                res = ~hit if isinstance(op, ast.NotIn | ast.NotEq) and isinstance(hit, pd.Series) else hit
                if isinstance(op, ast.NotIn | ast.NotEq) and not isinstance(hit, pd.Series):
                    res = not hit
            else:
                if isinstance(left, str) != isinstance(right, str) and not any(
                    isinstance(v, pd.Series) for v in (left, right)
                ):
                    raise self.expr.error(node, "cannot compare a string with a number in {}")
                try:
                    res = _CMP[type(op)](left, right)
                except TypeError:
                    raise self.expr.error(node, "cannot compare the values in {} (a string with a number?)") from None
            res = _as_bool(res)
            out = res if out is None else (out & res)
            left = right
        return out

    def call(self, node: ast.Call) -> Any:
        fname = node.func.id  # type: ignore[attr-defined]
        arg = self.ev(node.args[0])
        if fname == "isnan":
            return pd.isna(arg) if isinstance(arg, pd.Series) else bool(pd.isna(arg))
        if not _is_num(arg):
            raise self.expr.error(node.args[0], f"expected a number argument of {fname}(), got {{}}")
        if fname in _UNARY_FUNCS:
            return _UNARY_FUNCS[fname](arg)
        by = [kw.value for kw in node.keywords]
        if not by:
            if not isinstance(arg, pd.Series):
                return arg
            return getattr(arg, fname)()
        groups = by[0].elts if isinstance(by[0], ast.List | ast.Tuple) else [by[0]]
        keys = [self.column(g) for g in groups]  # type: ignore[arg-type]
        if not isinstance(arg, pd.Series):
            arg = pd.Series(arg, index=self.frame.index)
        return arg.groupby(keys, sort=False, dropna=False).transform(fname)


def evaluate(frame: pd.DataFrame, text: str | Expression, *, what: str = "--where") -> Any:
    """The value of ``text`` over ``frame``'s columns: a :class:`pandas.Series` aligned with ``frame`` or a scalar.

    Raises :class:`InputError` (one line) for text outside the grammar and for values it cannot combine (a string
    compared with a number, ``and`` of two numbers)."""
    expr = text if isinstance(text, Expression) else parse(text, what=what)
    try:
        with np.errstate(all="ignore"):
            return _Evaluator(expr, frame).ev(expr.tree)
    except InputError:
        raise
    except RecursionError:
        raise expr.error(None, "too deeply nested to evaluate") from None
    except Exception as exc:  # numpy/pandas raise many types for values they cannot combine
        raise expr.error(None, f"cannot be evaluated ({type(exc).__name__}: {_elide(str(exc), 100)})") from None


def filter_rows(frame: pd.DataFrame, where: str, *, what: str = "--where") -> pd.DataFrame:
    """The rows of ``frame`` where the boolean expression ``where`` holds (index kept, as ``DataFrame.query``)."""
    expr = parse(where, what=what)
    mask = _as_bool(evaluate(frame, expr))
    if not _is_bool(mask):
        raise expr.error(
            None, "expected a true/false filter such as n_params > 1e8, got a value that is not true/false"
        )
    if not isinstance(mask, pd.Series):
        return frame if mask else frame.iloc[0:0]
    return frame.loc[mask.to_numpy(dtype=bool)]


def derive_column(frame: pd.DataFrame, text: str, *, what: str = "--derive") -> pd.Series:
    """A new column computed from ``frame``'s columns (``--derive tokens='`Training FLOP` / (6 * n_params)'``)."""
    value = evaluate(frame, text, what=what)
    if isinstance(value, pd.Series):
        return value
    return pd.Series([value] * len(frame), index=frame.index, dtype=object if isinstance(value, str) else None)
