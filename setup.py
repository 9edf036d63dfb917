"""setup.py — the part of `pip install .` that pyproject.toml cannot say: libtinylm.so and the tinylm
program are built with CMake (Release, the default build that runs on any x86-64) and installed
inside the package: libtinylm.so beside _lib.py, which finds it there first, and the program as
tinylm/bin/tinylm, which the `tinylm` console command (tinylm/cli.py) runs. The wheel is
platform-specific (it carries both). A `python3` kernel spec whose program is "python" goes to the
environment's share/jupyter, so notebooks opened from this environment run in it. Build files go
under build-pip/, never the build/ folder a developer's CMake tree uses.

Before anything is built, the interpreter is checked: what it lacks is named with the command that
works, instead of setuptools' `invalid command 'bdist_wheel'` halfway through."""
import importlib.util
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))


def _check_tools():
    missing = []
    # setuptools before 70.1 builds wheels (and pip's metadata) through the wheel package's bdist_wheel
    if importlib.util.find_spec("wheel") is None and importlib.util.find_spec("setuptools.command.bdist_wheel") is None:
        missing.append(("wheel", "python3-wheel"))
    tools = [t for t in ("cmake",) if shutil.which(t) is None]
    if not any(shutil.which(c) for c in ("cc", "gcc", "clang")):
        tools.append("cc")
    if not missing and not tools:
        return
    # (NumPy is only needed at run time, where pip resolves it; an isolated build never sees it, so it
    # is named here only beside a real failure)
    if importlib.util.find_spec("numpy") is None:
        missing.append(("numpy", "python3-numpy"))
    lines = ["", "tinylm: this Python (%s) cannot build the package:" % sys.executable]
    for mod, deb in missing:
        lines.append("  - it has no `%s` module (Debian: %s)%s"
                     % (mod, deb, " (needed at run time)" if mod == "numpy" else ""))
    for t in tools:
        lines.append("  - `%s` is not on PATH (Debian: %s)" % (t, "cmake" if t == "cmake" else "build-essential"))
    lines += ["Either install what is missing for this Python (%s -m pip install %s) and run pip again, or use"
              % (sys.executable, " ".join(m for m, _ in missing) or "...")
              if missing else "Install it and run pip again, or use",
              "Debian's Python, which ./scripts/setup.sh and ./scripts/test.sh set up:",
              "  /usr/bin/python3 -m venv --system-site-packages .venv",
              "  .venv/bin/pip install --no-build-isolation --no-index .", ""]
    sys.exit("\n".join(lines))


_check_tools()

from setuptools import Distribution, setup  # noqa: E402  (after the check: its message first)
from setuptools.command.build_py import build_py  # noqa: E402


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        tree = os.path.join(ROOT, "build-pip", "cmake")
        subprocess.run(["cmake", "-S", ROOT, "-B", tree, "-DCMAKE_BUILD_TYPE=Release"], check=True)
        subprocess.run(["cmake", "--build", tree, "--target", "tinylm_shared", "tinylm_cli",
                        "-j", str(os.cpu_count() or 1)], check=True)
        pkg = os.path.join(self.build_lib, "tinylm")
        shutil.copy2(os.path.join(tree, "libtinylm.so"), os.path.join(pkg, "libtinylm.so"))
        os.makedirs(os.path.join(pkg, "bin"), exist_ok=True)
        shutil.copy2(os.path.join(tree, "tinylm"), os.path.join(pkg, "bin", "tinylm"))  # (mode kept: executable)


class WithLibrary(Distribution):
    def has_ext_modules(self):  # (a platform wheel: it holds a compiled library)
        return True


os.makedirs(os.path.join(ROOT, "build-pip"), exist_ok=True)
setup(cmdclass={"build_py": BuildWithLibrary}, distclass=WithLibrary,
      data_files=[("share/jupyter/kernels/python3", ["python/share/jupyter/kernels/python3/kernel.json"])],
      options={"build": {"build_base": os.path.join("build-pip", "setuptools")},
               "egg_info": {"egg_base": "build-pip"}})
