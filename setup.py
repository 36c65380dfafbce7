"""setuptools drives CMake: the wheel holds reshard/*.py and the extension _reshard (CMake target reshard_python).

    pip install --no-build-isolation .                           # configures and builds in build-wheel/cmake
    RESHARD_BUILD_DIR=build pip install --no-build-isolation .   # reuses a configured CMake build folder

With RESHARD_BUILD_DIR, the extension is taken from that folder as it was built there (CMake is not run: build it
first, e.g. scripts/main.sh or `cmake --build DIR --target reshard_python`; CI's tests install from the build they
test) and setuptools' own scratch goes to DIR/pip, so the source tree is left as it was.
Without it, CMake configures build-wheel/cmake at the top of the source tree (Release, no tests, for this
interpreter) and builds only the extension and the libraries it links; a second install rebuilds what changed.
CMAKE_BUILD_PARALLEL_LEVEL sets the build jobs (default: every core). The extension must be built for the
interpreter that installs it: a reused folder configured for another Python is refused.
"""

import importlib.machinery
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
REUSED = os.environ.get("RESHARD_BUILD_DIR")
SCRATCH = Path(REUSED).resolve() / "pip" if REUSED else ROOT / "build-wheel"  # build-*/ is git-ignored


def version():
    m = re.search(r"project\(reshard\s+VERSION\s+([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    if not m:
        sys.exit("setup.py: no project(reshard VERSION ...) in CMakeLists.txt")
    return m.group(1)


class CMakeExtension(Extension):
    def __init__(self, name, target):
        super().__init__(name, sources=[])
        self.target = target


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if REUSED:
            build = Path(REUSED).resolve()
            if not (build / "CMakeCache.txt").is_file():
                sys.exit(f"setup.py: RESHARD_BUILD_DIR={REUSED} is not a configured CMake build folder "
                         "(no CMakeCache.txt); configure it first (scripts/bootstrap.sh) or unset RESHARD_BUILD_DIR")
            print(f"reshard: reusing the CMake build folder {build}", flush=True)
        else:
            build = SCRATCH / "cmake"
            build.mkdir(parents=True, exist_ok=True)
            print(f"reshard: configuring CMake in {build}", flush=True)
            self.run_cmake(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                            f"-DPython3_EXECUTABLE={sys.executable}", "-DRESHARD_BUILD_TESTS=OFF",
                            "-DRESHARD_BUILD_BENCH=OFF"])
            jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
            self.run_cmake(["cmake", "--build", str(build), "--target", ext.target, "-j", jobs])

        suffix = importlib.machinery.EXTENSION_SUFFIXES[0]  # e.g. .cpython-311-x86_64-linux-gnu.so
        built = sorted((build / "python" / "reshard").glob("_reshard*.so"))
        match = [p for p in built if p.name == "_reshard" + suffix]
        if not match:
            sys.exit(f"setup.py: no _reshard{suffix} for this interpreter ({sys.executable}) in {build}/python/reshard "
                     f"(found: {[p.name for p in built] or 'nothing'}): build it there (cmake --build {build} "
                     f"--target {ext.target}), configured with -DPython3_EXECUTABLE={sys.executable}, or unset "
                     "RESHARD_BUILD_DIR")
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(match[0], dest)
        print(f"reshard: {match[0]} -> {dest}", flush=True)

    @staticmethod
    def run_cmake(cmd):
        try:
            subprocess.run(cmd, check=True)
        except FileNotFoundError:
            sys.exit("setup.py: cmake not found (Debian: apt-get install cmake, or run scripts/bootstrap.sh)")
        except subprocess.CalledProcessError as e:
            sys.exit(f"setup.py: {' '.join(cmd)} failed (exit {e.returncode})")


SCRATCH.mkdir(parents=True, exist_ok=True)
setup(
    version=version(),
    ext_modules=[CMakeExtension("reshard._reshard", target="reshard_python")],
    cmdclass={"build_ext": CMakeBuild},
    # setuptools' scratch (build/, *.egg-info) out of the source tree: build/ is CMake's folder there.
    options={"build": {"build_base": str(SCRATCH / "setuptools")}, "egg_info": {"egg_base": str(SCRATCH)}},
)
