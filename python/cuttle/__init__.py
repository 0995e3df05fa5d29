"""cuttle from Python: models, training and checkpoints of the C library
libcuttle.so through ctypes, with NumPy arrays in and out (docs/python.md)."""
from ._lib import Error, builtin_models, lib as _clib
from .data import load_data
from .model import Model
from .training import train

__version__ = _clib.ct_version().decode()
__all__ = ["Error", "Model", "builtin_models", "load_data", "train"]
