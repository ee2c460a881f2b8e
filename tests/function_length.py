#!/usr/bin/env python3
"""Fails when a function in the project's own code is longer than the limit.

CONTRIBUTING.md asks for functions short enough to read in one sitting; this
makes the limit a CTest check. It reads C and C++ by brace matching, not by
parsing: a brace block counts as a function body when the text before it ends
in a parameter list (with optional qualifiers) and it is not a control
statement. Lambdas and local classes count towards the function around them.

Usage: function_length.py [--max N] ROOT [FOLDER ...]
       function_length.py --self-test
"""
import argparse
import pathlib
import re
import sys

SUFFIXES = {".hpp", ".cpp", ".h", ".c", ".cu", ".cuh"}
CONTROL = re.compile(r"\b(if|for|while|switch|catch|do|else|try)\s*(\(|$)")
INITIALIZERS = re.compile(r"\)\s*(noexcept\s*)?:(?!:)")
QUALIFIERS = re.compile(
    r"\)\s*(const|noexcept(\s*\([^()]*\))?|override|final|mutable|&&|&|"
    r"->\s*[\w:<>,\s*&\[\]]+|requires\s+[^{]+|\s)*$")


def strip(text):
    """Blanks comments, strings and character literals, keeping newlines."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """Yields (name, first line, line count) for each outermost function body."""
    code = strip(text)
    # Preprocessor lines take no part in the brace structure.
    code = re.sub(r"(?m)^[ \t]*#.*(\\\n.*)*$", lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)
    depth_in_function = 0
    stack = []  # one entry per open brace: True where it opened a function body
    start = 0
    last = 0  # end of the previous statement or brace
    for i, c in enumerate(code):
        if c in ";":
            last = i + 1
        elif c == "{":
            head = code[last:i].strip()
            # A constructor's member initializers (") : a{1}, b(2)") end its head too.
            in_initializers = INITIALIZERS.search(head) is not None
            is_function = depth_in_function == 0 and (
                head.endswith(")") or QUALIFIERS.search(head) is not None or
                (in_initializers and head.endswith("}")))
            is_function = is_function and "(" in head and not CONTROL.search(head) \
                and not re.search(r"=\s*\[", head) and not head.startswith("extern")
            if is_function:
                start = i
                called = re.findall(r"([~\w:]+)\s*(?:<[^()]*>)?\s*\(", head)
                name = called[0] if called else "?"
            if depth_in_function or is_function:
                depth_in_function += 1
            # An initializer's braces leave the head open for the body that follows them.
            stack.append("initializer" if in_initializers and not is_function and not depth_in_function else is_function)
            if stack[-1] != "initializer":
                last = i + 1
        elif c == "}":
            if stack and stack.pop() == "initializer":
                continue
            if depth_in_function:
                depth_in_function -= 1
                if depth_in_function == 0:
                    first = code.count("\n", 0, start) + 1
                    lines = code.count("\n", start, i) + 1
                    yield name, first, lines
            last = i + 1
    return


def self_test():
    """The scanner against texts whose answer is known; returns the failures."""
    body = "\n".join(f"  x += {i};" for i in range(7))
    cases = [
        ("int f(int x) {\n" + body + "\n  return x;\n}\n", [("f", 1, 10)]),
        # Control blocks, lambdas and local classes belong to the function around them.
        ("void g() {\n  if (a) {\n  }\n  auto l = [&](int y) {\n    return y;\n  };\n  struct L { int h() { return 1; } };\n}\n",
         [("g", 1, 8)]),
        # Class and namespace bodies are not functions; their members are.
        ("namespace n {\nstruct S {\n  int m() const noexcept {\n    return 1;\n  }\n  S() : v{1} {}\n};\n}\n",
         [("m", 3, 3), ("S", 6, 1)]),
        # Braces in comments, strings and characters do not count; a trailing return type does.
        ('auto h() -> int {\n  // }\n  const char* s = "}{";\n  char c = \'{\';\n  /* { */\n  return 0;\n}\n',
         [("h", 1, 7)]),
        # Initializers with braces are no bodies.
        ("int v[] = {1, 2};\nS s{3};\nvoid k() {}\n", [("k", 3, 1)]),
    ]
    failures = []
    for text, want in cases:
        got = list(functions(text))
        if got != want:
            failures.append(f"{text!r}: got {got}, want {want}")
    return failures


def main():
    if sys.argv[1:] == ["--self-test"]:
        failures = self_test()
        for f in failures:
            print(f)
        print("self-test " + ("failed" if failures else "passed"))
        return 1 if failures else 0
    parser = argparse.ArgumentParser()
    parser.add_argument("--max", type=int, default=150)
    parser.add_argument("root")
    parser.add_argument("folders", nargs="*",
                        default=["include", "src", "python", "tools", "bench", "examples"])
    args = parser.parse_args()
    root = pathlib.Path(args.root)
    too_long = []
    for folder in args.folders:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            for name, first, lines in functions(path.read_text(errors="replace")):
                if lines > args.max:
                    too_long.append(f"{path.relative_to(root)}:{first}: {name} is {lines} lines")
    for line in too_long:
        print(line)
    if too_long:
        print(f"{len(too_long)} function(s) longer than {args.max} lines; cut them into phases")
        return 1
    print(f"no function longer than {args.max} lines in {', '.join(args.folders)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
