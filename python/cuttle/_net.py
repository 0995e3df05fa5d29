"""A model's graph on a fixed batch and its plan on a backend: the C handles
behind a Model and a training run, with NumPy in and out."""
import ctypes

import numpy as np

from ._lib import CT_EVAL, CT_F32, CT_I64, Error, Optimized, P, check, check_ptr, encode, lib

_DTYPES = {CT_F32: np.float32, 5: np.int32, CT_I64: np.int64}


def pointer(array):
    """The address of a C-contiguous array's data (the array must outlive the call)."""
    assert array.flags.c_contiguous
    return array.ctypes.data_as(P)


class Backend:
    """A ct_backend: "cpu" (all cores), "cpu:N", "cuda", "cuda:N", or "auto"
    (the GPU when there is one, else the CPU)."""

    def __init__(self, device):
        if not isinstance(device, str):
            raise TypeError(f"cuttle: device must be a string such as 'cpu', 'cpu:2' or 'cuda', "
                            f"got {device!r}")
        handle = P()
        if device == "auto" and lib.ct_backend_new(b"cuda", ctypes.byref(handle)) == 0:
            self.handle = handle
            return
        check(lib.ct_backend_new(encode("cpu" if device == "auto" else device),
                                 ctypes.byref(handle)))
        self.handle = handle

    @property
    def name(self):
        return lib.ct_backend_name(self.handle).decode()

    def close(self):
        if self.handle:
            lib.ct_backend_free(self.handle)
            self.handle = None


class Net:
    """Images x [batch, C, H, W] through a model's definition text to its
    logits [batch, classes] (kept), with labels and a loss for training
    (`labels`: the inputs in the order cuttle train makes them).  The plan
    comes with make_plan, after anything else the graph needs."""

    def __init__(self, text, input_shape, classes, batch, labels=False):
        self.plan = None
        self.graph = check_ptr(lib.ct_graph_new())
        self.batch, self.classes = batch, classes
        shape = (ctypes.c_int64 * 4)(batch, *input_shape)
        self.x = lib.ct_input(self.graph, b"x", CT_F32, 4, shape)
        self.labels = lib.ct_input(self.graph, b"labels", CT_I64, 1, shape) if labels else None
        self.logits = lib.ct_model_build(self.graph, text.encode(), self.x, classes)
        try:
            check_ptr(self.logits, self.graph)
        except Error:
            self.close()
            raise
        lib.ct_tensor_keep(self.logits)

    def make_plan(self, backend, seed):
        check(lib.ct_graph_status(self.graph))
        plan = P()
        check(lib.ct_plan_new(self.graph, backend.handle, seed, ctypes.byref(plan)))
        self.plan = plan

    def optimize(self):
        """Replace graph and plan by the inference form (ct_plan_optimize),
        as cuttle predict does."""
        out = Optimized()
        check(lib.ct_plan_optimize(self.plan, self.x, self.logits, ctypes.byref(out)))
        lib.ct_plan_free(self.plan)
        lib.ct_graph_free(self.graph)
        self.graph, self.plan, self.x, self.logits = out.graph, out.plan, out.x, out.y

    def close(self):
        if self.plan:
            lib.ct_plan_free(self.plan)
        if self.graph:
            lib.ct_graph_free(self.graph)
        self.plan = self.graph = None

    # ---- state ----

    def state(self):
        """(name, tensor) of every parameter and buffer, in creation order."""
        n = lib.ct_graph_n_state(self.graph)
        tensors = [lib.ct_graph_state(self.graph, i) for i in range(n)]
        return [(lib.ct_tensor_name(t).decode(), t) for t in tensors]

    @staticmethod
    def shape_and_dtype(tensor):
        dtype = _DTYPES.get(lib.ct_tensor_dtype(tensor))
        if dtype is None:
            raise Error(f"cuttle: {lib.ct_tensor_name(tensor).decode()} is neither f32, i32 "
                        f"nor i64")
        return tuple(lib.ct_tensor_dim(tensor, d) for d in range(lib.ct_tensor_ndim(tensor))), \
            dtype

    def read(self, tensor):
        """A new array holding a state tensor, an input or a kept tensor."""
        out = np.empty(*self.shape_and_dtype(tensor))
        check(lib.ct_plan_read(self.plan, tensor, pointer(out), out.nbytes))
        return out

    def write(self, tensor, array):
        """Write a C-contiguous array of the tensor's exact size."""
        check(lib.ct_plan_write(self.plan, tensor, pointer(array), array.nbytes))

    def copy_state_from(self, other):
        """Every parameter and buffer from the tensor of the same name in another Net."""
        for name, tensor in self.state():
            source = lib.ct_graph_find(other.graph, name.encode())
            if not source:
                raise Error(f"cuttle: '{name}' has no match in the source model")
            self.write(tensor, other.read(source))

    # ---- running ----

    def logits_of(self, images, out):
        """Logits of exactly `batch` images [batch, C, H, W] into out [batch, classes]
        (both C-contiguous float32)."""
        check(lib.ct_plan_write(self.plan, self.x, pointer(images), images.nbytes))
        check(lib.ct_plan_run(self.plan, CT_EVAL))
        check(lib.ct_plan_read_f32(self.plan, self.logits, pointer(out), out.size))

