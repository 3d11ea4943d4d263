#!/usr/bin/env python3
"""Size limits on the code: no code file over 400 lines, no function over 80 lines outside
kernels/ (CUDA kernels keep their one-piece bodies; their files are held to 400 lines too).

Files: the .cpp .hpp .cu .cuh .h .c .py .sh .inc files git tracks, less build/, reports/ and
generated files (a '@generated' or 'DO NOT EDIT' mark in their first lines); a line is a
physical line, blank and comment lines included.

Functions, counted from the line of the name to the line of the closing brace (as ctags
does), comments and blank lines included:
- C, C++, CUDA: a small brace-matching scanner (ci/c_functions.py). Every brace body outside
  another function's body is a function: free and member functions, constructors,
  TEST/TEST_F/RC_GTEST_PROP bodies, and lambdas at namespace or class scope or in an
  initializer (a command table of lambdas). A lambda or a local class inside a function
  counts towards that function, so a long lambda makes its function long.
- Python: every def (nested ones and methods too), from the ast.
- Shell: every `name() {` to the first `}` line indented no deeper.

Exit 0 when everything is within the limits, 1 naming each file and function over them.
Standard library only; about a second on this tree.
"""

import argparse
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from c_functions import c_functions

FILE_LIMIT = 400
FUNCTION_LIMIT = 80
EXTENSIONS = (".cpp", ".hpp", ".cu", ".cuh", ".h", ".c", ".py", ".sh", ".inc")
EXCLUDED_DIRS = ("build/", "reports/")
FUNCTION_EXEMPT_DIRS = ("kernels/",)  # CUDA kernels: exempt from the function limit only
GENERATED_MARKS = ("@generated", "DO NOT EDIT")

# Files others are editing now, allowed over a limit until they are split. TEMPORARY: one
# line per file, each to be removed by whoever splits that file.
TEMPORARILY_ALLOWED = {
}

# --- Python and shell ------------------------------------------------------------------


def python_functions(text):
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((node.name, node.lineno, node.end_lineno))
    return out


_SH_FUNCTION = re.compile(r"^(\s*)(?:function\s+)?([A-Za-z_][\w:.-]*)\s*\(\)\s*\{?")


def shell_functions(text):
    out = []
    lines = text.split("\n")
    for i, l in enumerate(lines):
        m = _SH_FUNCTION.match(l)
        if not m:
            continue
        if l.rstrip().endswith("}") and "{" in l:
            out.append((m.group(2), i + 1, i + 1))
            continue
        indent = len(m.group(1))
        for j in range(i + 1, len(lines)):
            s = lines[j]
            if s.strip() == "}" and len(s) - len(s.lstrip()) <= indent:
                out.append((m.group(2), i + 1, j + 1))
                break
    return out


def functions(path, text):
    if path.endswith(".py"):
        return python_functions(text)
    if path.endswith(".sh"):
        return shell_functions(text)
    return c_functions(text)


# --- Files -----------------------------------------------------------------------------


def code_files(root, walk):
    """Paths relative to root, with '/' separators."""
    paths = None
    if not walk:
        try:
            r = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True)
            paths = [p for p in r.stdout.decode().split("\0") if p]
        except (OSError, subprocess.CalledProcessError):
            print("check_limits: not a git checkout; walking the tree instead", file=sys.stderr)
    if paths is None:
        paths = []
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            for f in files:
                paths.append(os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/"))
    return sorted(p for p in paths if p.endswith(EXTENSIONS) and not p.startswith(EXCLUDED_DIRS))


def generated(text):
    head = "\n".join(text.split("\n", 5)[:5])
    return any(m in head for m in GENERATED_MARKS)


def check(root, walk=False, list_functions=False):
    """Returns (problems, notes, counts)."""
    problems, notes = [], []
    n_files = n_functions = 0
    for rel in code_files(root, walk):
        try:
            text = (Path(root) / rel).read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, IsADirectoryError):
            continue  # deleted in the work tree, not yet in the index
        if generated(text):
            continue
        n_files += 1
        n_lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if n_lines > FILE_LIMIT:
            msg = f"{rel}: {n_lines} lines (limit {FILE_LIMIT})"
            (notes if rel in TEMPORARILY_ALLOWED else problems).append(msg)
        try:
            fns = functions(rel, text)
        except SyntaxError as e:
            problems.append(f"{rel}:{e.lineno}: cannot be parsed ({e.msg})")
            continue
        exempt = rel.startswith(FUNCTION_EXEMPT_DIRS)
        for name, first, last in fns:
            n = last - first + 1
            if list_functions:
                print(f"{n:5d} {rel}:{first} {name}{'  (exempt)' if exempt else ''}")
            if exempt:
                continue
            n_functions += 1
            if n > FUNCTION_LIMIT:
                msg = f"{rel}:{first}: function {name}: {n} lines (limit {FUNCTION_LIMIT})"
                (notes if rel in TEMPORARILY_ALLOWED else problems).append(msg)
    return problems, notes, (n_files, n_functions)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[1]), help="the tree to check (default: this repository)")
    ap.add_argument("--walk", action="store_true", help="list the files by walking the tree instead of asking git")
    ap.add_argument("--list-functions", action="store_true", help="print every function found with its length")
    a = ap.parse_args()
    problems, notes, (n_files, n_functions) = check(a.root, a.walk, a.list_functions)
    for n in notes:
        print(f"check_limits: allowed for now (TEMPORARILY_ALLOWED): {n}")
    for p in problems:
        print(f"check_limits: FAIL {p}")
    print(
        f"check_limits: {n_files} code files (limit {FILE_LIMIT} lines), {n_functions} functions and lambdas "
        f"outside {', '.join(FUNCTION_EXEMPT_DIRS)} (limit {FUNCTION_LIMIT} lines): "
        + (f"{len(problems)} over" if problems else "all within")
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
