"""The size check (ci/check_limits.py) fires: synthetic trees with a file one line over the
limit, functions one line over it in each form the check claims to see, and their twins at
the limit that must pass. Standard library only:
python3 -m unittest discover -s tests/ci -v"""

import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

CHECK = Path(__file__).resolve().parents[2] / "ci" / "check_limits.py"


def body(n):
    """n statement lines."""
    return "".join(f"  x += {i};\n" for i in range(n))


def function(name, n, header=None):
    """A C++ function of exactly n lines, name line to closing brace."""
    return f"{header or 'int ' + name + '(int x)'} {{\n" + body(n - 3) + "  return x;\n}\n"


sys.path.insert(0, str(CHECK.parent))
import check_limits  # noqa: E402


def write_tree(d, files):
    for rel, text in files.items():
        p = Path(d) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def run_check(files):
    """The check's problems on a tree of these files (in this process: fast)."""
    with tempfile.TemporaryDirectory() as d:
        write_tree(d, files)
        problems, _, _ = check_limits.check(d, walk=True)
        return 1 if problems else 0, "\n".join(problems) + ("\nall within" if not problems else "")


class CodeLimits(unittest.TestCase):
    def assert_fails(self, files, *names):
        code, out = run_check(files)
        self.assertEqual(code, 1, out)
        for n in names:
            self.assertIn(n, out)
        return out

    def assert_passes(self, files):
        code, out = run_check(files)
        self.assertEqual(code, 0, out)
        self.assertIn("all within", out)

    def test_the_command_exits_1_naming_each_problem(self):
        with tempfile.TemporaryDirectory() as d:
            write_tree(d, {"a/big.cpp": "// x\n" * 401 + function("f", 81)})
            r = subprocess.run([sys.executable, str(CHECK), "--root", d, "--walk"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("check_limits: FAIL a/big.cpp: 482 lines (limit 400)", r.stdout)
            self.assertIn("check_limits: FAIL a/big.cpp:402: function f: 81 lines (limit 80)", r.stdout)
        with tempfile.TemporaryDirectory() as d:
            write_tree(d, {"a/ok.cpp": function("f", 80)})
            r = subprocess.run([sys.executable, str(CHECK), "--root", d, "--walk"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("all within", r.stdout)

    def test_file_over_400_lines_fails_naming_it(self):
        out = self.assert_fails({"core/big.hpp": "// x\n" * 401, "core/ok.hpp": "// x\n" * 400}, "core/big.hpp: 401 lines")
        self.assertNotIn("ok.hpp", out)
        for ext in ("cpp", "cu", "cuh", "h", "c", "py", "sh", "inc"):
            self.assert_fails({f"a/big.{ext}": "\n" * 401}, f"a/big.{ext}: 401 lines")
        self.assert_passes({"core/ok.hpp": "// x\n" * 400, "notes.txt": "x\n" * 1000})

    def test_kernel_files_are_held_to_400_lines_but_not_their_functions(self):
        self.assert_fails({"kernels/op/k.cu": "// x\n" * 401}, "kernels/op/k.cu: 401 lines")
        self.assert_passes({"kernels/op/k.cu": function("kernel", 200, "__global__ void kernel(float* x)")})

    def test_build_and_reports_are_left_out(self):
        self.assert_passes({"build/host/gen.cpp": "\n" * 1000, "reports/run.sh": "\n" * 1000})

    def test_function_over_80_lines_fails_naming_it(self):
        src = "namespace kv {\n" + function("long_one", 81) + function("at_limit", 80) + "}  // namespace kv\n"
        out = self.assert_fails({"check/f.cpp": src}, "check/f.cpp:2: function long_one: 81 lines")
        self.assertNotIn("at_limit", out)
        self.assert_passes({"check/f.cpp": function("at_limit", 80)})

    def test_member_functions_constructors_and_operators(self):
        cls = (
            "struct S {\n int x_, y_;\n"
            + function("S", 81, "S(int a) : x_{a}, y_(a)")
            + function("operator()", 81, " int operator()(int x) const")
            + "};\n"
            + function("S::get", 81, "int S::get(int x) const noexcept")
        )
        self.assert_fails(
            {"a.cpp": cls},
            "a.cpp:3: function S: 81 lines",
            "a.cpp:84: function operator(): 81 lines",
            "function S::get: 81 lines",
        )

    def test_test_bodies_count(self):
        src = '#include "gtest.h"\n' + function("", 81, "TEST(Suite, LongTest)") + function("", 81, "RC_GTEST_PROP(P, Long, (int a))")
        self.assert_fails({"tests/t.cpp": src}, "function TEST(Suite, LongTest): 81 lines", "function RC_GTEST_PROP(P, Long)")

    def test_a_lambda_makes_its_function_long(self):
        src = "void f() {\n  auto g = [&](int x) {\n" + body(77) + "    return x;\n  };\n}\n"
        self.assert_fails({"a.cpp": src}, "a.cpp:1: function f: 82 lines")

    def test_lambdas_outside_functions_count(self):
        table = (
            "struct Cmd { const char* name; int (*run)(int); };\n"
            "static const Cmd kTable[] = {\n"
            '  {"short", [](int x) { return x; }},\n'
            '  {"long", [](int x) -> int {\n' + body(78) + "    return x;\n  }},\n};\n"
            "auto g = [](int x) mutable {\n" + body(78) + "  return x;\n};\n"
        )
        out = self.assert_fails({"cli/t.cpp": table}, "cli/t.cpp:4: function lambda: 81 lines", "cli/t.cpp:86: function lambda: 81")
        self.assertNotIn(":3:", out)

    def test_data_tables_are_not_functions(self):
        table = "static const int kData[] = {\n" + "  1, 2, 3,\n" * 100 + "};\nstruct T { int a; } t{\n" + "1\n" * 90 + "};\n"
        self.assert_passes({"core/table.cpp": table, "core/e.hpp": "enum class E {\n" + "  a,\n" * 90 + "};\n"})

    def test_braces_in_comments_strings_and_literals_do_not_count(self):
        tricky = textwrap.dedent(
            """\
            // a } in a comment {
            /* and { in a block
               comment } } */
            const char* s = "{ not a body";
            const char* r = R"x({ raw ) " } {)x";
            char c = '}';
            int n = 1'000'000;
            #define OPEN {
            """
        )
        src = tricky + function("after", 81, 'int after(int x) /* { */')
        self.assert_fails({"a.cpp": src}, "a.cpp:9: function after: 81 lines")
        self.assert_passes({"a.cpp": tricky + function("after", 80)})

    def test_both_preprocessor_branches_are_read(self):
        src = "#ifdef X\n" + function("one", 10) + "#else\n" + function("other", 81) + "#endif\n" + function("last", 81)
        self.assert_fails({"a.cpp": src}, "function other: 81 lines", "function last: 81 lines")

    def test_python_and_shell_functions(self):
        py = "class C:\n    def method(self):\n" + "        x = 1\n" * 80 + "\ndef ok():\n    return 1\n"
        sh = "#!/bin/sh\nlong() {\n" + "  echo x\n" * 79 + "}\nshort() { echo y; }\n"
        out = self.assert_fails({"t.py": py, "s.sh": sh}, "t.py:2: function method: 81 lines", "s.sh:2: function long: 81 lines")
        self.assertNotIn("ok", out.replace("check_limits", ""))
        self.assert_passes({"t.py": "def ok():\n" + "    x = 1\n" * 79, "s.sh": "f() {\n" + "  echo\n" * 78 + "}\n"})


if __name__ == "__main__":
    unittest.main()
