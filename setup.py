"""setup.py — the part of `pip install .` that pyproject.toml cannot say: libtinylm.so is built with
CMake (Release, the default build that runs on any x86-64, only the shared-library target) and
installed inside the package beside _lib.py, which finds it there first. The wheel is
platform-specific (it carries that library). Build files go under build-pip/, never the build/
folder a developer's CMake tree uses."""
import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        tree = os.path.join(ROOT, "build-pip", "cmake")
        subprocess.run(["cmake", "-S", ROOT, "-B", tree, "-DCMAKE_BUILD_TYPE=Release"], check=True)
        subprocess.run(["cmake", "--build", tree, "--target", "tinylm_shared", "-j", str(os.cpu_count() or 1)],
                       check=True)
        shutil.copy2(os.path.join(tree, "libtinylm.so"), os.path.join(self.build_lib, "tinylm", "libtinylm.so"))


class WithLibrary(Distribution):
    def has_ext_modules(self):  # (a platform wheel: it holds a compiled library)
        return True


os.makedirs(os.path.join(ROOT, "build-pip"), exist_ok=True)
setup(cmdclass={"build_py": BuildWithLibrary}, distclass=WithLibrary,
      options={"build": {"build_base": os.path.join("build-pip", "setuptools")},
               "egg_info": {"egg_base": "build-pip"}})
