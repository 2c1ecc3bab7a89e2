"""Hatch build hook: compile the pure scheduling core (allotment.core, decision 40) and the pure baseline policies
beside it (allotment.policies, decision 72) with mypyc into the wheel.

Off unless asked for: `HATCH_BUILD_HOOK_ENABLE_CUSTOM=true pip install --no-deps .` builds a wheel whose
allotment/core and allotment/policies modules are C extensions next to their sources (Python imports the extension
first). Editable installs (development) always stay pure Python, so an edited module is never shadowed by a stale
build.

Must not: compile anything outside those two pure packages (the shell depends on SQLAlchemy, FastAPI and friends,
which gain little and would tie the build to their types).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

COMPILED = ("core", "policies")
"""The pure packages compiled: the scheduling core and the baselines beside it (they read the core's state)."""


class CompileCore(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        work = Path(tempfile.mkdtemp(prefix="allot-mypyc-"))
        (work / "allotment").mkdir()
        (work / "allotment" / "__init__.py").write_text("")
        modules: list[str] = []
        for package in COMPILED:
            folder = work / "allotment" / package
            shutil.copytree(Path(self.root) / "src" / "allotment" / package, folder)
            modules += sorted(str(p.relative_to(work)) for p in folder.glob("*.py"))
        subprocess.run([sys.executable, "-m", "mypyc", *modules], cwd=work, check=True)
        built = [*work.glob("*.so"), *(work / "allotment").glob("*/*.so")]
        for package in COMPILED:
            if not any(p.parent == work / "allotment" / package for p in built):
                raise RuntimeError(f"mypyc built no extension for allotment.{package}")
        for path in built:
            build_data["force_include"][str(path)] = str(path.relative_to(work))
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
