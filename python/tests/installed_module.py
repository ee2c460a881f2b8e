# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""Checks the module `cmake --install` put in INSTALLED_DIR, imported as a user imports it (run from
another directory, without PYTHONPATH): it is the one imported, and its stubs are this build's.
Exit 77 (skipped) when nothing is installed there yet.

Usage: installed_module.py INSTALLED_DIR SOURCE_STUBS
"""

import filecmp
import glob
import os
import sys

installed, stubs = sys.argv[1], sys.argv[2]
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]
if not glob.glob(os.path.join(installed, "refdec*.so")):
    print(f"skipped: no refdec module under {installed} (run cmake --install on this build)")
    sys.exit(77)
assert "PYTHONPATH" not in os.environ, "run without PYTHONPATH"
import refdec  # noqa: E402

assert os.path.dirname(refdec.__file__) == os.path.abspath(installed), f"imported {refdec.__file__}, not the installed module"
assert filecmp.cmp(os.path.join(installed, "refdec.pyi"), stubs, shallow=False), "the installed stubs are not this build's"
print(f"imported {refdec.__file__} with torch {sys.modules['torch'].__version__}")
