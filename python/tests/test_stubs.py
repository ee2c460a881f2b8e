# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""The type stubs match the package's modules, and every public entity has a docstring."""

import inspect
import re
import subprocess
import sys
from pathlib import Path

import refdec

PYTHON_DIR = Path(__file__).resolve().parents[1]


def check_stubs(module):
    generated = subprocess.run([sys.executable, str(PYTHON_DIR / "make_stubs.py"), f"refdec.{module}"], check=True,
                               capture_output=True, text=True).stdout
    committed = (PYTHON_DIR / "refdec" / f"{module}.pyi").read_text()
    assert generated == committed, \
        f"run: PYTHONPATH=build/python /usr/bin/python3 python/make_stubs.py refdec.{module} > python/refdec/{module}.pyi"
    compile(committed, f"{module}.pyi", "exec")


def test_committed_stubs_are_the_generated_ones():
    check_stubs("_core")
    compile((PYTHON_DIR / "refdec" / "__init__.pyi").read_text(), "__init__.pyi", "exec")


def test_committed_stubs_of_the_torch_part_are_the_generated_ones(torch):
    check_stubs("_torch")
    # The names refdec explains the absence of when refdec._torch cannot load.
    assert {name for name in vars(refdec._torch) if not name.startswith("_")} == refdec._TORCH_NAMES


def description(doc):
    """A pybind11 docstring without its signature lines (`name(args) -> type`, `(arg0: T) -> U`)."""
    return [l for l in (doc or "").strip().splitlines()
            if l.strip() and not re.match(r"^\w*\(.*\) -> ", l) and l.strip() != "Overloaded function."]


def test_every_public_entity_is_documented():
    missing = []
    for name, obj in vars(refdec).items():
        if name.startswith("_"):
            continue
        if not description(obj.__doc__):
            missing.append(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or (hasattr(obj, "__members__") and attr in ("name", "value", *obj.__members__)):
                    continue
                doc = member.__doc__ if isinstance(member, property) else getattr(member, "__doc__", None)
                if isinstance(member, staticmethod):
                    doc = member.__func__.__doc__
                if not description(doc):
                    missing.append(f"{name}.{attr}")
    assert missing == []
