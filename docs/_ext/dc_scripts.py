# SPDX-License-Identifier: Apache-2.0
"""Import one of the repository's tools/ scripts (not a package) as a module.

Shared by the site's extensions (dc_bench, dc_gpu_compare, dc_promises), so
each renders from the script that writes or checks its data instead of a copy.
"""

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def import_tool(name: str) -> ModuleType:
    """Import tools/<name>.py without running it as a script.

    Args:
        name: the script's name without ``.py`` (e.g. ``"provenance"``).
    Returns:
        module: the script, imported under the name ``dc_tool_<name>``.
    Raises:
        OSError, ImportError: the script is missing or does not import.
    """
    spec = importlib.util.spec_from_file_location(f"dc_tool_{name}", REPO / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod
