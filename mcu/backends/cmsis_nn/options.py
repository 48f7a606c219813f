"""The CMSIS-NN backend's build options: where the user's CMSIS-NN sources are.

The command line's ``--cmsis-nn PATH`` (or ``CMSIS_NN_PATH``) and the Python API's ``cmsis_nn=`` become
these options at the edge (:func:`mcu.api.backend_options`); a build without them has no entry for
CMSIS-NN and does not put it in its default preference order (mcu/backends/registry.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CmsisNNOptions:
    root: Path  # a CMSIS-NN source tree (Include/arm_nnfunctions.h and Source/), resolved
