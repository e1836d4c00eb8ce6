"""torch's device-backend autoload entry point for torch_pjrt.

Kept outside the package so that a broken or half-built torch_pjrt can never
make ``import torch`` itself fail: the error becomes a warning.
"""


def load() -> None:
    try:
        import torch_pjrt  # noqa: F401
    except Exception as e:  # noqa: BLE001
        import warnings

        warnings.warn(f"torch_pjrt could not be loaded, so the tpu device is unavailable: {e}", stacklevel=2)
