"""libcuttle.so through ctypes: finding it, the prototypes the package
uses, and turning a failed call into a cuttle.Error.

The library is looked for, in order, at:
  1. $CUTTLE_LIBRARY (a path to libcuttle.so);
  2. libcuttle.so beside this file (``make install-python`` puts it there);
  3. ../../build/libcuttle.so from this file (a checkout's build tree);
  4. the system's libcuttle (``make install`` into /usr/local/lib, found by
     ctypes.util.find_library, or by the loader's own search).
"""
import ctypes
import ctypes.util
import os

c_int64_p = ctypes.POINTER(ctypes.c_int64)

CT_OK = 0
CT_F32, CT_I64 = 0, 6
CT_TRAIN, CT_EVAL = 0, 1
CT_SAVE_MODEL = 1


class Error(RuntimeError):
    """A call into libcuttle failed.  ``status`` is the C status name
    ("CT_ERR_IO", ...); the message is the library's ct_last_error()."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class SgdArgs(ctypes.Structure):
    _fields_ = [("lr", ctypes.c_float), ("momentum", ctypes.c_float),
                ("dampening", ctypes.c_float), ("weight_decay", ctypes.c_float),
                ("nesterov", ctypes.c_bool)]


class AdamArgs(ctypes.Structure):
    _fields_ = [("lr", ctypes.c_float), ("beta1", ctypes.c_float), ("beta2", ctypes.c_float),
                ("eps", ctypes.c_float), ("weight_decay", ctypes.c_float),
                ("decoupled", ctypes.c_bool)]


class Augment(ctypes.Structure):
    _fields_ = [("crop_pad", ctypes.c_int), ("hflip", ctypes.c_bool), ("cutout", ctypes.c_int)]


class LoaderArgs(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int), ("shuffle", ctypes.c_bool), ("drop_last", ctypes.c_bool),
                ("augment", Augment), ("seed", ctypes.c_uint64), ("n_threads", ctypes.c_int),
                ("prefetch", ctypes.c_int), ("shard", ctypes.c_int), ("n_shards", ctypes.c_int)]


class Meta(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p), ("value", ctypes.c_char_p)]


class OnnxExportArgs(ctypes.Structure):
    _fields_ = [("opset", ctypes.c_int), ("fixed_batch", ctypes.c_bool),
                ("softmax", ctypes.c_bool), ("model_name", ctypes.c_char_p),
                ("n_meta", ctypes.c_int), ("meta", ctypes.POINTER(Meta))]


class OptimizeReport(ctypes.Structure):
    _fields_ = [("folded", ctypes.c_int), ("removed", ctypes.c_int),
                ("kernels_before", ctypes.c_int), ("kernels_after", ctypes.c_int),
                ("arena_before", ctypes.c_size_t), ("arena_after", ctypes.c_size_t),
                ("values_before", ctypes.c_int64), ("values_after", ctypes.c_int64)]


class Optimized(ctypes.Structure):
    _fields_ = [("graph", ctypes.c_void_p), ("plan", ctypes.c_void_p), ("x", ctypes.c_void_p),
                ("y", ctypes.c_void_p), ("report", OptimizeReport)]


P = ctypes.c_void_p
_STATUS = ctypes.c_int
# name: (restype, argtypes); a restype of _STATUS is checked by call().
_PROTOTYPES = {
    "ct_last_error": (ctypes.c_char_p, []),
    "ct_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "ct_version": (ctypes.c_char_p, []),
    "ct_graph_new": (P, []),
    "ct_graph_free": (None, [P]),
    "ct_graph_status": (_STATUS, [P]),
    "ct_input": (P, [P, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, c_int64_p]),
    "ct_tensor_name": (ctypes.c_char_p, [P]),
    "ct_tensor_dtype": (ctypes.c_int, [P]),
    "ct_tensor_ndim": (ctypes.c_int, [P]),
    "ct_tensor_dim": (ctypes.c_int64, [P, ctypes.c_int]),
    "ct_tensor_bytes": (ctypes.c_size_t, [P]),
    "ct_tensor_keep": (None, [P]),
    "ct_graph_n_state": (ctypes.c_int, [P]),
    "ct_graph_state": (P, [P, ctypes.c_int]),
    "ct_graph_find": (P, [P, ctypes.c_char_p]),
    "ct_cross_entropy": (P, [P, P, P, ctypes.c_float]),
    "ct_graph_backward": (_STATUS, [P, P]),
    "ct_adam_defaults": (AdamArgs, []),
    "ct_graph_sgd": (_STATUS, [P, SgdArgs]),
    "ct_graph_adam": (_STATUS, [P, AdamArgs]),
    "ct_backend_new": (_STATUS, [ctypes.c_char_p, ctypes.POINTER(P)]),
    "ct_backend_free": (None, [P]),
    "ct_backend_name": (ctypes.c_char_p, [P]),
    "ct_plan_new": (_STATUS, [P, P, ctypes.c_uint64, ctypes.POINTER(P)]),
    "ct_plan_free": (None, [P]),
    "ct_plan_run": (_STATUS, [P, ctypes.c_int]),
    "ct_plan_write": (_STATUS, [P, P, P, ctypes.c_size_t]),
    "ct_plan_stage": (_STATUS, [P, P, P, ctypes.c_size_t]),
    "ct_plan_read": (_STATUS, [P, P, P, ctypes.c_size_t]),
    "ct_plan_read_f32": (_STATUS, [P, P, P, ctypes.c_int64]),
    "ct_plan_set_lr": (None, [P, ctypes.c_float]),
    "ct_plan_lr": (ctypes.c_float, [P]),
    "ct_plan_step": (ctypes.c_int64, [P]),
    "ct_plan_optimize": (_STATUS, [P, P, P, ctypes.POINTER(Optimized)]),
    "ct_plan_save": (_STATUS, [P, ctypes.c_char_p, ctypes.c_uint, ctypes.c_int,
                               ctypes.POINTER(Meta)]),
    "ct_checkpoint_open": (_STATUS, [ctypes.c_char_p, ctypes.POINTER(P)]),
    "ct_checkpoint_close": (None, [P]),
    "ct_checkpoint_meta": (ctypes.c_char_p, [P, ctypes.c_char_p]),
    "ct_plan_load_checkpoint": (_STATUS, [P, P, ctypes.c_uint]),
    "ct_dataset_load": (_STATUS, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                  ctypes.POINTER(P)]),
    "ct_dataset_free": (None, [P]),
    "ct_dataset_size": (ctypes.c_int64, [P]),
    "ct_dataset_channels": (ctypes.c_int, [P]),
    "ct_dataset_height": (ctypes.c_int, [P]),
    "ct_dataset_width": (ctypes.c_int, [P]),
    "ct_dataset_classes": (ctypes.c_int, [P]),
    "ct_dataset_class_name": (ctypes.c_char_p, [P, ctypes.c_int]),
    "ct_dataset_batch": (_STATUS, [P, c_int64_p, ctypes.c_int, P, P]),
    "ct_dataset_mean": (ctypes.c_float, [P, ctypes.c_int]),
    "ct_dataset_std": (ctypes.c_float, [P, ctypes.c_int]),
    "ct_loader_new": (_STATUS, [P, ctypes.POINTER(LoaderArgs), ctypes.POINTER(P)]),
    "ct_loader_free": (None, [P]),
    "ct_loader_batches": (ctypes.c_int64, [P]),
    "ct_loader_start": (_STATUS, [P, ctypes.c_int64, ctypes.c_int64]),
    "ct_loader_next": (_STATUS, [P, ctypes.POINTER(P), ctypes.POINTER(P),
                                 ctypes.POINTER(ctypes.c_int)]),
    "ct_model_builtin_names": (ctypes.POINTER(ctypes.c_char_p), []),
    "ct_model_source": (_STATUS, [ctypes.c_char_p, ctypes.POINTER(P)]),
    "ct_model_build": (P, [P, ctypes.c_char_p, P, ctypes.c_int]),
    "ct_onnx_export": (_STATUS, [P, P, P, ctypes.POINTER(OnnxExportArgs), ctypes.c_char_p]),
}


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("CUTTLE_LIBRARY"):
        return [os.environ["CUTTLE_LIBRARY"]]
    found = ctypes.util.find_library("cuttle")
    return [os.path.join(here, "libcuttle.so"),
            os.path.join(here, os.pardir, os.pardir, "build", "libcuttle.so"),
            found or "libcuttle.so"]


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("cuttle: libcuttle.so not found; build it (make) and set CUTTLE_LIBRARY "
                      "to its path, or run make install-python (docs/python.md). Tried: " +
                      "; ".join(tried))


lib = _load()
for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    _fn = getattr(lib, _name)
    _fn.restype, _fn.argtypes = _restype, _argtypes

_libc = ctypes.CDLL(None)
_libc.free.argtypes = [P]
_libc.free.restype = None


def last_error():
    return lib.ct_last_error().decode("utf-8", "replace")


def check(status):
    """Raise Error with the library's message unless status is CT_OK."""
    if status != CT_OK:
        raise Error(last_error(), lib.ct_status_name(status).decode())


def check_ptr(pointer, graph=None):
    """An op builder's or constructor's result: raise when it is NULL (or the
    graph holds an error)."""
    if graph is not None:
        check(lib.ct_graph_status(graph))
    if not pointer:
        raise Error(last_error())
    return pointer


def encode(text):
    return None if text is None else os.fsencode(text)


def model_text(name_or_path):
    """The definition text of a built-in model or a model file."""
    text = P()
    check(lib.ct_model_source(encode(name_or_path), ctypes.byref(text)))
    try:
        return ctypes.string_at(text.value).decode()
    finally:
        _libc.free(text)


def builtin_models():
    names, out = lib.ct_model_builtin_names(), []
    while names[len(out)]:
        out.append(names[len(out)].decode())
    return out
