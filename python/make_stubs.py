# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""Writes the type stubs of one of the refdec package's compiled modules (refdec._core,
refdec._torch) from its own signatures and docstrings (pybind11 states both), so that the stubs
cannot drift from the binding:

    PYTHONPATH=build/python /usr/bin/python3 python/make_stubs.py refdec._core > python/refdec/_core.pyi
    PYTHONPATH=build/python /usr/bin/python3 python/make_stubs.py refdec._torch > python/refdec/_torch.pyi

python/tests/test_stubs.py checks that the committed files are what this prints.
"""

import importlib
import inspect
import os
import re
import sys

# The package's sources beside this script lack its compiled modules: import the built package.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

# Functions that return one of their arguments or a new object (typed `object` by pybind11).
RETURNS = {"plan_step": "StepPlan", "keep_accepted": "KeepPlan", "linearize": "LinearTree", "dtype": "torch.dtype",
           "propose": "DraftTree", "draft": "LinearTree"}
# Arguments pybind11 types as `object`.
ARGUMENTS = {("add", "drafter"): "Optional[refdec._core.Drafter]", ("load_llama2c", "dtype"): "Optional[torch.dtype]",
             ("random", "dtype"): "Optional[torch.dtype]", ("process", "row"): "numpy.typing.ArrayLike",
             ("sample", "logits"): "numpy.typing.ArrayLike", ("sample_from_probs", "probs"): "numpy.typing.ArrayLike",
             ("accept_sampled", "logits"): "numpy.typing.ArrayLike"}
# What each module's stubs import.
IMPORTS = {"refdec._core": "import os\nfrom typing import Any, Callable, List, Optional, Tuple, Union, overload\n\n"
                           "import numpy\nimport numpy.typing\n\n",
           "refdec._torch": "import os\nfrom typing import List, Optional, Union\n\nimport torch\n\nfrom refdec import _core\n\n"}
MODULE = ""  # the module being written: its own names unqualified, the other's as _core.Name


def clean(text: str) -> str:
    text = text.replace(MODULE + ".", "").replace("refdec.", "").replace("os.PathLike", "Union[str, os.PathLike]")
    text = re.sub(r"numpy\.ndarray\[(numpy\.\w+)\]", r"numpy.typing.NDArray[\1]", text)
    text = re.sub(r"\bfunction\b", "Callable[..., Any]", text)
    return re.sub(r"<[^<>]* object at 0x[0-9a-f]+>|<\w+\.\w+: \d+>", "...", text)


def docstring(doc: str, indent: str) -> str:
    doc = doc.strip()
    if not doc:
        return ""
    lines = doc.replace('"""', "'''").replace("\\", "\\\\").splitlines()
    return indent + '"""' + ("\n" + indent).join(l.rstrip() for l in lines).replace(indent + "\n", "\n") + '"""\n'


def function(name: str, obj, indent: str, static: bool = False) -> str:
    """One `def` per overload from the pybind11 docstring: signature lines, then the description."""
    doc = obj.__doc__ or ""
    lines = doc.strip().splitlines()
    signatures, body = [], []
    for line in lines:
        if line.startswith(name + "(") and not body:
            signatures.append(line)
        elif line.strip() or body:
            body.append(line)
    out = ""
    for sig in signatures:
        sig = clean(sig)
        params, _, ret = sig[len(name) + 1:].rpartition(") -> ")
        if name in RETURNS and ret == "object":
            ret = RETURNS[name]
        for (fn, arg), typ in ARGUMENTS.items():
            if fn == name:
                params = re.sub(rf"\b{arg}: object", f"{arg}: {clean(typ)}", params)
        if static:
            out += indent + "@staticmethod\n"
        if len(signatures) > 1:
            out += indent + "@overload\n"
        out += f"{indent}def {name}({params}) -> {ret}:\n"
        out += docstring("\n".join(body), indent + "    ") or indent + "    ...\n"
        if not body:
            out = out.rstrip("\n") + "\n"
    return out


def klass(name: str, cls) -> str:
    bases = [clean(f"{b.__module__}.{b.__name__}") for b in cls.__bases__ if b.__module__.startswith("refdec.")]
    out = f"class {name}({', '.join(bases)}):\n" if bases else f"class {name}:\n"
    out += docstring((cls.__doc__ or "").split("\n\nMembers:")[0], "    ")
    members = getattr(cls, "__members__", None)
    if members is not None:  # a pybind11 enum
        for member in members:
            out += f"    {member}: {name}\n"
        out += f"    def __init__(self, value: int) -> None: ...\n    @property\n    def value(self) -> int: ...\n"
        out += "    @property\n    def name(self) -> str: ...\n"
        return out + "\n"
    for attr, obj in cls.__dict__.items():
        if attr.startswith("_") and attr not in ("__init__", "__len__", "__str__", "__repr__"):
            continue
        if attr in ("__str__", "__repr__") and not callable(obj):
            continue
        if isinstance(obj, property):
            ret = clean(obj.fget.__doc__.strip().splitlines()[0]).rpartition(" -> ")[2] if obj.fget.__doc__ else "Any"
            ret = RETURNS.get(attr, ret) if ret == "object" else ret
            out += f"    @property\n    def {attr}(self) -> {ret}:\n"
            out += docstring(obj.__doc__ or "", "        ") if obj.__doc__ and not obj.__doc__.startswith("(") else "        ...\n"
            if obj.fset is not None:
                out += f"    @{attr}.setter\n    def {attr}(self, value: {ret}) -> None: ...\n"
        elif isinstance(obj, staticmethod):
            out += function(attr, obj.__func__, "    ", static=True)
        elif callable(obj):
            out += function(attr, obj, "    ")
    return out + "\n"


def main() -> None:
    global MODULE
    MODULE = sys.argv[1]
    module = importlib.import_module(MODULE)
    out = [f'"""Type stubs of {MODULE} (generated by python/make_stubs.py; do not edit)."""\n', IMPORTS[MODULE]]
    if "__version__" in vars(module):
        out.append("__version__: str\n\n")
    errors = [name for name in ("Error", "ArgumentError", "IoError") if name in vars(module)]
    for name in errors:
        exc = getattr(module, name)
        bases = ", ".join(b.__name__ for b in exc.__bases__)
        out.append(f"class {name}({bases}):\n" + docstring(exc.__doc__, "    ") + "\n")
    classes, functions = [], []
    for name, obj in vars(module).items():
        if name.startswith("_") or name in errors:
            continue
        if inspect.isclass(obj):
            classes.append((name, obj))
        elif callable(obj):
            functions.append((name, obj))
    # Bases first, so that the stub reads top to bottom.
    classes.sort(key=lambda c: (len(c[1].__mro__), 0))
    for name, cls in classes:
        out.append(klass(name, cls))
    for name, fn in functions:
        out.append(function(name, fn, "") + "\n")
    sys.stdout.write("".join(out).rstrip("\n") + "\n")


if __name__ == "__main__":
    main()
