import os
import sys

import pytest
import torch

import torch_pjrt

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _strict_mode_and_seed():
    """Every test starts in strict mode with a fixed seed."""
    torch_pjrt.set_eager_mode("strict")
    torch.manual_seed(0)
    yield
    torch_pjrt.set_eager_mode("strict")
