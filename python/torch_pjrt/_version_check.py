"""Refuses to load the extension under a torch other than the one it was built for."""

import torch


def check_torch_version() -> None:
    try:
        from ._build_info import TORCH_VERSION
    except ImportError:  # a source tree without a build: let the extension import fail plainly
        return
    found = torch.__version__
    if found.split("+")[0] != TORCH_VERSION.split("+")[0]:
        raise ImportError(
            f"torch_pjrt was built against torch {TORCH_VERSION} but torch {found} is installed. "
            "Its C++ extension is tied to that exact torch version. Rebuild it with: "
            "pip install --no-build-isolation --force-reinstall --no-deps ."
        )
