# Copyright 2026 The refdec Authors. SPDX-License-Identifier: Apache-2.0
"""refdec: reference-guided speculative decoding (drafters, draft trees, the step plan, the walk,
sampling, suffix-array datastores, the StepDriver and a continuous-batching Session on libtorch).

Everything but the model and the Session comes from refdec._core, which needs no torch (numpy
arrays in and out); the model and the Session come from refdec._torch, loaded when torch imports.
"""

import importlib as _importlib
import importlib.util as _importlib_util
import platform as _platform
import sys as _sys

from refdec._core import *  # noqa: F401,F403
from refdec._core import __version__  # noqa: F401

# What refdec._torch defines: without it, asking for one of these says why it is missing.
_TORCH_NAMES = frozenset({"GenerateOptions", "GenerateStats", "LlamaConfig", "LlamaModel", "RopeStyle", "SamplingPath",
                          "Session", "StepTimes"})

if _importlib_util.find_spec("refdec._torch") is None:
    _torch_missing = ("refdec was built without its torch part (refdec._torch: libtorch and python3-torch were not found "
                      "when it was built)")
else:
    try:
        _importlib.import_module("torch")  # first: refdec._torch works on torch's Python state
    except ImportError as error:
        _torch_missing = (f"it needs torch (Debian 12: python3-torch), and this interpreter, {_sys.executable} "
                          f"(Python {_platform.python_version()}), cannot import it ({error})")
    else:
        try:
            from refdec._torch import *  # noqa: F401,F403
            _torch_missing = None
        except ImportError as error:  # another torch than the one it was built against: the message says which
            _torch_missing = str(error)


def __getattr__(name: str):
    if name in _TORCH_NAMES and _torch_missing is not None:
        raise ImportError(f"refdec.{name} is not available: {_torch_missing}", name=name)
    raise AttributeError(f"module 'refdec' has no attribute '{name}'")
