"""Functions of C, C++ and CUDA source, for ci/check_limits.py: a small brace-matching
scanner. Comments, strings, raw strings, character literals and preprocessor lines are
stripped; each #if/#else branch is read from the state at the #if, the first branch's end
kept where the branches leave different brace depths. Every brace body outside another
function's body is a function: free and member functions, constructors (their member
initializers `x_{a}` are not bodies), TEST/TEST_F/RC_GTEST_PROP bodies, and lambdas at
namespace or class scope or in an initializer (a table of lambdas). A lambda or a local
class inside a function counts towards that function. Data (`= {...}`, `T x{...}`, enums)
is not a function."""

import copy
import re

_TOKEN = re.compile(
    r"""
    (?P<pp>^[ \t]*\#(?:\\\n|[^\n])*)
  | (?P<nl>\n)
  | (?P<ws>[ \t\r\f\v]+)
  | (?P<cont>\\\n)
  | (?P<lc>//(?:\\\n|[^\n])*)
  | (?P<bc>/\*.*?\*/)
  | (?P<raw>(?:u8|[uUL])?R"(?P<delim>[^()\\\s"]{0,16})\(.*?\)(?P=delim)")
  | (?P<str>(?:u8|[uUL])?"(?:\\.|[^"\\\n])*")
  | (?P<num>\.?\d(?:'?[0-9A-Za-z_.]|[eEpP][+-])*)
  | (?P<chr>(?:u8|[uUL])?'(?:\\.|[^'\\\n])*')
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op>::|->|==|!=|<=|>=)
  | (?P<p>.)
    """,
    re.VERBOSE | re.DOTALL | re.MULTILINE,
)
_CONDITIONALS = {"if": "if", "ifdef": "if", "ifndef": "if", "elif": "else", "elifdef": "else", "elifndef": "else",
                 "else": "else", "endif": "endif"}


def c_tokens(text):
    """(kind, value, line) of the code's tokens: no comments, string and character literals
    as one token each; of the preprocessor lines only #if, #else and #endif, as ('pp',
    'if'|'else'|'endif', line)."""
    out = []
    line = 1
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind == "nl":
            line += 1
        elif kind == "ws":
            continue
        elif kind in ("cont", "lc", "bc", "pp"):
            value = m.group()
            if kind == "pp":
                words = value.lstrip(" \t")[1:].replace("\\\n", " ").split()
                d = _CONDITIONALS.get(words[0] if words else "")
                if d:
                    out.append(("pp", d, line))
            line += value.count("\n")
        else:
            value = m.group()
            out.append(("str" if kind == "raw" else kind, value, line))
            if kind in ("raw", "str"):
                line += value.count("\n")
    return out


def _groups(header):
    """The header's top-level items: ('(', i, j), ('[', i, j) for bracketed groups (token
    indices of the brackets), ('t', i, i) for single tokens."""
    items, i = [], 0
    close = {"(": ")", "[": "]"}
    while i < len(header):
        v = header[i][1]
        if v in close:
            depth, j = 0, i
            while j < len(header):
                w = header[j][1]
                if w in close:
                    depth += 1
                elif w in (")", "]"):
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            items.append((v, i, min(j, len(header) - 1)))
            i = j + 1
        else:
            items.append(("t", i, i))
            i += 1
    return items


_LAMBDA_SPECIFIERS = {"mutable", "constexpr", "consteval", "noexcept", "static"}
_NOT_A_NAME = {"__launch_bounds__", "__attribute__", "alignas", "__declspec", "decltype", "requires"}


def _lambda_start(header):
    """The index of the '[' opening a lambda whose body the next '{' opens, or None."""
    items = _groups(header)
    for k, (kind, i, _) in enumerate(items):  # a trailing return type: cut at '->'
        if kind == "t" and header[i][1] == "->":
            items = items[:k]
            break
    while items and (
        (items[-1][0] == "t" and header[items[-1][1]][1] in _LAMBDA_SPECIFIERS)
        or (items[-1][0] == "(" and len(items) > 1 and items[-2][0] == "t" and header[items[-2][1]][1] == "noexcept")
    ):
        items.pop()
    if items and items[-1][0] == "(":
        items.pop()
    if not items or items[-1][0] != "[":
        return None
    i = items[-1][1]
    if i > 0 and (header[i - 1][0] in ("id", "num") or header[i - 1][1] in (")", "]", ">")):
        return None  # an array or operator[]: `a[3]{`, `operator[](i) {`
    return i


def _strip_prefix(header):
    """The header without leading template<...> clauses and [[attributes]]."""
    i = 0
    while i < len(header):
        v = header[i][1]
        if v == "template" and i + 1 < len(header) and header[i + 1][1] == "<":
            depth, i = 0, i + 1
            while i < len(header):
                depth += {"<": 1, ">": -1}.get(header[i][1], 0)
                i += 1
                if depth == 0:
                    break
        elif v == "[" and i + 1 < len(header) and header[i + 1][1] == "[":
            depth = 0
            while i < len(header):
                depth += {"[": 1, "]": -1}.get(header[i][1], 0)
                i += 1
                if depth == 0:
                    break
        else:
            break
    return header[i:]


def _function_name(header, items):
    """The name before a header's parameter list, and the line it is on."""
    for kind, i, j in items:
        if kind != "(" or i == 0 or header[i - 1][1] in _NOT_A_NAME:
            continue
        k = i - 1
        if header[k][1] == "operator":  # operator()(...)
            return "operator()", header[k][2]
        if k >= 1 and header[k - 1][1] == "operator":  # operator==(...)
            k -= 1
        elif k >= 2 and header[k][1] == "]" and header[k - 2][1] == "operator":  # operator[](...)
            k -= 2
        while k >= 2 and header[k - 1][1] == "::" and header[k - 2][0] == "id":
            k -= 2
        name = "".join(t[1] for t in header[k:i])
        if name.startswith(("TEST", "TYPED_TEST", "RC_")) or (name.isupper() and "_" in name):  # a macro: TEST(Suite, Name)
            args = "".join(t[1] for t in header[i + 1 : j]).split(",")
            name += "(" + ", ".join(args[:2]) + ")"
        return name, header[k][2]
    return "?", header[0][2]


def _classify(header, scope):
    """What a '{' opens after these header tokens, in a scope of kind `scope` (file,
    class or data): ('function', name, line), or ('file',), ('class',), ('data',) for
    scopes whose headers are read, or ('init',) for a brace inside a header (a member
    initializer, a default argument) that the header goes on after."""
    opened = sum({"(": 1, "[": 1, ")": -1, "]": -1}.get(t[1], 0) for t in header)
    if opened > 0:  # inside parentheses: a braced default argument, `f(x, {1, 2})`
        return ("init",)
    start = _lambda_start(header)
    if start is not None:
        return ("function", "lambda", header[start][2])
    if scope == "data" or not header:
        return ("data",)
    h = _strip_prefix(header)
    if not h:
        return ("data",)
    first = h[0][1]
    if first == "namespace" or (first == "inline" and len(h) > 1 and h[1][1] == "namespace"):
        return ("file",)
    if first == "extern" and len(h) == 2 and h[1][0] == "str":
        return ("file",)
    items = _groups(h)
    for kind, i, _ in items:
        if kind == "t" and h[i][1] == "=" and not (i > 0 and h[i - 1][1] == "operator"):
            return ("data",)
    parens = [it for it in items if it[0] == "("]
    words = {h[i][1] for kind, i, _ in items if kind == "t"}
    if words & {"class", "struct", "union"} and not parens:
        return ("class",)
    if "enum" in words or not parens:
        return ("data",)
    # A constructor's member initializer `x_{a}` (after `) :`) is not its body.
    after = [h[i][1] for kind, i, _ in items if kind == "t" and i > parens[0][2]]
    if ":" in after and (h[-1][0] == "id" or h[-1][1] == ">"):
        return ("init",)
    name, line = _function_name(h, items)
    return ("function", name, line)


def c_functions(text):
    """(name, first line, last line) of each function body and lambda that is not inside
    another function's body."""
    found = []
    # Frames: [kind, header tokens, function name, first line]; kinds file, class and data
    # collect headers; function and block only match braces.
    stack = [["file", [], None, 0]]
    # Per open #if: the stack as it stood at the #if (each branch starts from it) and as
    # the first branch left it (kept where the branches end at different depths).
    branches = []
    for tok in c_tokens(text):
        kind, v, line = tok
        if kind == "pp":
            if v == "if":
                branches.append([copy.deepcopy(stack), None])
            elif v == "else" and branches:
                if branches[-1][1] is None:
                    branches[-1][1] = stack
                stack = copy.deepcopy(branches[-1][0])
            elif v == "endif" and branches:
                _, first = branches.pop()
                if first is not None and len(first) != len(stack):
                    stack = first
            continue
        top = stack[-1]
        if top[0] in ("function", "block", "init"):
            if v == "{":
                stack.append(["block", None, None, line])
            elif v == "}":
                stack.pop()
                if top[0] == "function":
                    found.append((top[2], top[3], line))
                parent = stack[-1]
                if parent[1] is not None:  # the frame closed was opened from a header
                    parent[1] = parent[1] + [tok] if top[0] == "init" else []  # a constructor's header goes on
            continue
        header = top[1]
        if v == "{":
            what = _classify(header, top[0])
            if what[0] == "function":
                stack.append(["function", None, what[1], what[2]])
            elif what[0] == "init":
                stack.append(["init", None, None, line])
            else:
                stack.append([what[0], [], None, line])
        elif v == "}":
            if len(stack) > 1:
                stack.pop()
                stack[-1][1] = []
        elif v == ";" or (v == "," and top[0] == "data"):
            top[1] = []
        elif v == ":" and len(header) == 1 and header[0][1] in ("public", "private", "protected"):
            top[1] = []
        else:
            header.append(tok)
    return found
