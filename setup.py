"""Builds the C++ core and the torch extension with CMake (ccache + ninja when present)."""

import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        # Never autoload an installed (maybe stale) torch_pjrt while building this one.
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        import torch

        build_dir = os.environ.get("TORCH_PJRT_BUILD_DIR", os.path.join(ROOT, "build"))
        os.makedirs(build_dir, exist_ok=True)
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.check_call(
            ["cmake", ROOT, *generator, f"-DPython3_EXECUTABLE={sys.executable}", "-DCMAKE_BUILD_TYPE=Release"],
            cwd=build_dir,
        )
        jobs = os.environ.get("MAX_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_C", "-j", jobs])
        built = [f for f in os.listdir(build_dir) if f.startswith("_C.") and f.endswith(".so")]
        if not built:
            raise RuntimeError("CMake did not produce the _C extension")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        # Replace atomically: a running process may have the old file mapped.
        shutil.copy2(os.path.join(build_dir, built[0]), target + ".tmp")
        os.replace(target + ".tmp", target)
        # Record the torch the extension was built against (checked at import).
        info = f'TORCH_VERSION = "{torch.__version__}"\n'
        for pkg_dir in {os.path.dirname(target), os.path.join(ROOT, "python", "torch_pjrt")}:
            with open(os.path.join(pkg_dir, "_build_info.py"), "w") as f:
                f.write(info)


setup(ext_modules=[Extension("torch_pjrt._C", sources=[])], cmdclass={"build_ext": CMakeBuild})
