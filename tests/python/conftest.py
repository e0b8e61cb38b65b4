import os
import sys
import tempfile

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

# The tests' kernels go to a disk cache of their own, never the user's.
os.environ.setdefault("PEJIT_CACHE_DIR", tempfile.mkdtemp(prefix="pejit-pytest-"))

DTYPES = ["float32", "float16", "bfloat16"]
# Relative error (max-norm) against float64: f32 kernels, then 16-bit
# inputs and outputs (the reference reads the same rounded inputs).
TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}


def numpy_dtype(name):
    if name == "bfloat16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return np.dtype(name)


@pytest.fixture
def rng():
    return np.random.default_rng()


def random_array(rng, shape, dtype):
    """Fresh normal values in `dtype`, and the same values in float64."""
    x = rng.standard_normal(shape).astype(np.float32).astype(numpy_dtype(dtype))
    return x, x.astype(np.float64)


def poisoned(shape, dtype):
    return np.full(shape, np.nan, dtype=np.float32).astype(numpy_dtype(dtype))
