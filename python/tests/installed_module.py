# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""Checks the package `cmake --install` put in INSTALLED_DIR (.../refdec), imported as a user imports
it (run from another directory, without PYTHONPATH): it is the one imported, and its Python files and
stubs are this build's. Exit 77 (skipped) when nothing is installed there yet.

Usage: installed_module.py INSTALLED_DIR SOURCE_DIR
"""

import filecmp
import glob
import os
import sys

installed, source = sys.argv[1], sys.argv[2]
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]
if not glob.glob(os.path.join(installed, "_core*.so")):
    print(f"skipped: no refdec package under {installed} (run cmake --install on this build)")
    sys.exit(77)
assert "PYTHONPATH" not in os.environ, "run without PYTHONPATH"
import refdec  # noqa: E402

assert os.path.dirname(refdec.__file__) == os.path.abspath(installed), f"imported {refdec.__file__}, not the installed package"
for name in ("__init__.py", "__init__.pyi", "_core.pyi", "_torch.pyi"):
    assert filecmp.cmp(os.path.join(installed, name), os.path.join(source, name), shallow=False), f"the installed {name} is not this build's"
torch = sys.modules.get("torch")
print(f"imported {refdec.__file__}" + (f" with torch {torch.__version__}" if "Session" in vars(refdec) else " without its torch part"))
