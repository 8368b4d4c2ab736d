"""The house's size limits: no module of ``shared/engram`` over 500 lines of code; no function
of ``shared/engram`` or ``functions/`` over 60 lines of code, none of ``infra/`` over 120.

A line of code is a line that holds code (``code_lines``): blank lines, comment-only lines and
the lines of docstrings (a string standing as a statement: a module's, class's or function's
docstring, or an attribute's) do not count. So documentation never pushes a module over, and a
module over its limit is split by responsibility, not trimmed of its explanations.

A module or function still over its limit while its split is under way is named in
``STILL_OVER`` with the issue that splits it. The list may only shrink: an entry that is now
within its limit (or no longer exists) fails the test until it is taken off.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE_LINES = 500
FUNCTION_LINES = {"shared/engram": 60, "functions": 60, "infra": 120}

#: ``path`` (a module) or ``path:function`` (a function, by its qualified name) -> the issue
#: that brings it within the limit.
STILL_OVER: dict[str, str] = {}


#: tokens that are no code: comments, line breaks, indentation, the file's ends
_NOT_CODE = frozenset(
    {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENCODING,
        tokenize.ENDMARKER,
    }
)


def code_lines(source: str) -> set[int]:
    """The numbers of the lines of ``source`` that hold code: a line with any token but a
    comment, and not only a docstring's (a string expression statement's) text."""
    tree = ast.parse(source)
    documentation = [
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in _NOT_CODE:
            continue
        first, last = token.start[0], token.end[0]
        if token.type == tokenize.STRING and any(
            start <= first and last <= end for start, end in documentation
        ):
            continue
        lines.update(range(first, last + 1))
    return lines


def _python_files(folder: str) -> Iterator[Path]:
    for path in sorted((ROOT / folder).rglob("*.py")):
        if "node_modules" not in path.parts and "cdk.out" not in path.parts:
            yield path


def _functions(tree: ast.AST, code: set[int], prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, lines of code from its ``def`` to its end) of every function, nested
    ones included; ``code`` are the module's ``code_lines``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                assert node.end_lineno is not None
                yield name, len(code & set(range(node.lineno, node.end_lineno + 1)))
            yield from _functions(node, code, f"{name}.")
        else:
            yield from _functions(node, code, prefix)


def functions_of(source: str) -> dict[str, int]:
    """Every function of ``source`` -> its lines of code."""
    return dict(_functions(ast.parse(source), code_lines(source)))


@cache  # the tree does not change during a run; both tests read it
def over_the_limits() -> dict[str, int]:
    """Every module and function over its limit -> its lines of code."""
    found: dict[str, int] = {}
    for path in _python_files("shared/engram"):
        lines = len(code_lines(path.read_text()))
        if lines > MODULE_LINES:
            found[path.relative_to(ROOT).as_posix()] = lines
    for folder, limit in FUNCTION_LINES.items():
        for path in _python_files(folder):
            rel = path.relative_to(ROOT).as_posix()
            for name, lines in functions_of(path.read_text()).items():
                if lines > limit:
                    found[f"{rel}:{name}"] = lines
    return found


def test_no_module_or_function_is_over_its_limit_unless_listed() -> None:
    unlisted = {name: n for name, n in over_the_limits().items() if name not in STILL_OVER}
    assert unlisted == {}, f"over the house limits (lines of code): {unlisted}"


def test_every_listed_offender_is_still_over_its_limit() -> None:
    gone = sorted(set(STILL_OVER) - set(over_the_limits()))
    assert gone == [], f"within the limits now, so delete them from STILL_OVER: {gone}"


def test_the_function_walk_sees_nested_functions_and_methods() -> None:
    source = (
        "def f():\n    def g():\n        pass\n\nclass C:\n    def m(self):\n        x = 1\n"
        "        return x\n"
    )
    assert functions_of(source) == {"f": 3, "f.g": 2, "C.m": 3}


SOURCE = '''"""A module's docstring,
over two lines."""

import os  # a comment after code counts

# a comment on its own line does not


def f(x):
    """A function's docstring.

    With a blank line inside.
    """
    text = """a string that is a value,
    not a docstring"""
    return os.sep + text + x


class C:
    value: int = 0
    """An attribute's docstring."""
'''


def test_only_lines_of_code_count() -> None:
    assert sorted(code_lines(SOURCE)) == [4, 9, 14, 15, 16, 19, 20]
    assert functions_of(SOURCE) == {"f": 4}  # def, the two lines of the value, return


def test_a_function_with_a_docstring_on_its_def_line_counts_that_line() -> None:
    assert functions_of('def f(): """Doc."""\n') == {"f": 1}
    assert code_lines('"""Only a docstring."""\n\n# and a comment\n') == set()
