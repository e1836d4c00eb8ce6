"""The tools' import of torch_pjrt, retried while another process may be rebuilding the extension."""

from __future__ import annotations

import time


def import_torch_pjrt(attempts: int = 10, wait_seconds: float = 30):
    """Imports torch_pjrt, waiting ``wait_seconds`` between tries; the last failure is raised."""
    for attempt in range(attempts):
        try:
            import torch_pjrt

            return torch_pjrt
        except (ImportError, OSError):
            if attempt == attempts - 1:
                raise
            time.sleep(wait_seconds)
