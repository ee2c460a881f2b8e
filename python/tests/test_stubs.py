# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""The type stubs match the module, and every public entity has a docstring."""

import inspect
import re
import subprocess
import sys
from pathlib import Path

import refdec

PYTHON_DIR = Path(__file__).resolve().parents[1]


def test_committed_stubs_are_the_generated_ones():
    generated = subprocess.run([sys.executable, str(PYTHON_DIR / "make_stubs.py")], check=True,
                               capture_output=True, text=True).stdout
    committed = (PYTHON_DIR / "refdec.pyi").read_text()
    assert generated == committed, "run: PYTHONPATH=build/python /usr/bin/python3 python/make_stubs.py > python/refdec.pyi"
    compile(committed, "refdec.pyi", "exec")


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
