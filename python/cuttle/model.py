"""cuttle.Model: a model with its weights on a device, NumPy in and out."""
import ctypes

import numpy as np

from . import _lib
from ._info import Info, short_name
from ._lib import CT_SAVE_MODEL, Error, Meta, OnnxExportArgs, P, check, encode, lib
from ._net import Backend, Net
from .data import Dataset, evaluate

PREDICT_BATCH = 64  # as cuttle predict: batches of up to 64, the last padded
EVAL_BATCH = 500    # as cuttle eval
STATE_BATCH = 1     # the net that holds the weights runs nothing but an ONNX export
ONNX_MIN_OPSET, ONNX_MAX_OPSET = 13, 17


class Model:
    """A model and its weights on a device.

    Model("resnet18", classes=10) builds a built-in model (or a model file)
    for input_shape images with fresh weights from `seed`; Model.load reads
    a checkpoint; cuttle.train returns one.  close() (or a with block, or
    garbage collection) frees the C side."""

    def __init__(self, model="simplecnn", classes=10, input_shape=(1, 28, 28), device="cpu",
                 seed=1):
        if not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise ValueError(f"cuttle: seed must be a whole number from 0, got {seed!r}")
        self._open(Info.plain(model, classes, input_shape), device, seed)

    @classmethod
    def load(cls, path, device="cpu", model=None, input_shape=None, classes=None):
        """A checkpoint: model.safetensors from cuttle train or Model.save, which
        describes its model, or a plain state_dict file with model=,
        input_shape= and classes=.  model= also overrides a checkpoint's own."""
        checkpoint = P()
        check(lib.ct_checkpoint_open(encode(path), ctypes.byref(checkpoint)))
        self = cls.__new__(cls)
        try:
            if lib.ct_checkpoint_meta(checkpoint, b"model") is not None:
                info = Info.from_checkpoint(checkpoint, path)
                if model is not None:
                    info.name, info.text = short_name(model), _lib.model_text(model)
            elif model is None or input_shape is None or classes is None:
                raise Error(f"cuttle: {path} has no cuttle metadata (a plain state_dict?); give "
                            f"model=, input_shape= and classes=", "CT_ERR_FORMAT")
            else:
                info = Info.plain(model, classes, input_shape)
            self._open(info, device, 1)
            check(lib.ct_plan_load_checkpoint(self._net.plan, checkpoint, CT_SAVE_MODEL))
        except BaseException:
            self.close()
            raise
        finally:
            lib.ct_checkpoint_close(checkpoint)
        return self

    @classmethod
    def _from_net(cls, info, backend, net):
        """A model over a backend that this takes over, with another net's weights."""
        self = cls.__new__(cls)
        self._info, self._backend, self._net, self._predictor = info, None, None, None
        state = Net(info.text, info.input_shape, info.classes, STATE_BATCH)
        try:
            state.make_plan(backend, 1)
            state.copy_state_from(net)
        except BaseException:
            state.close()
            raise
        self._backend, self._net = backend, state
        return self

    def _open(self, info, device, seed):
        self._info, self._backend, self._net, self._predictor = info, None, None, None
        self._backend = Backend(device)
        self._net = Net(info.text, info.input_shape, info.classes, STATE_BATCH)
        self._net.make_plan(self._backend, seed)

    # ---- what it is ----

    name = property(lambda self: self._info.name, doc="the model's name ('simplecnn')")
    text = property(lambda self: self._info.text, doc="its definition (docs/model-format.md)")
    input_shape = property(lambda self: self._info.input_shape, doc="(channels, height, width)")
    classes = property(lambda self: self._info.classes, doc="the number of classes")
    class_names = property(lambda self: list(self._info.class_names))
    mean = property(lambda self: list(self._info.mean), doc="per-channel normalization")
    std = property(lambda self: list(self._info.std))
    dataset = property(lambda self: self._info.dataset, doc="what it was trained on, or None")

    @property
    def device(self):
        return self._check_open().name

    def __repr__(self):
        if not self._net:
            return f"<cuttle.Model {self.name} (closed)>"
        return (f"<cuttle.Model {self.name} {'x'.join(map(str, self.input_shape))} -> "
                f"{self.classes} classes on {self.device}>")

    # ---- lifetime ----

    def close(self):
        """Free the plans, graphs and backend (idempotent); the model is unusable after."""
        for net in (getattr(self, "_predictor", None), getattr(self, "_net", None)):
            if net:
                net.close()
        backend = getattr(self, "_backend", None)
        if backend:
            backend.close()
        self._predictor = self._net = self._backend = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if _lib is not None and _lib.lib is not None:  # not at interpreter shutdown
            self.close()

    def _check_open(self):
        if not getattr(self, "_net", None):
            raise Error("cuttle: this Model is closed")
        return self._backend

    # ---- inference ----

    def predict(self, x):
        """Logits [N, classes] (float32) of images x [N, C, H, W] (float32,
        normalized like the training data: (pixel/255 - mean) / std)."""
        self._check_open()
        x = self._check_images(x)
        n = x.shape[0]
        out = np.empty((n, self.classes), np.float32)
        if n == 0:
            return out
        net = self._predictor_for(min(n, PREDICT_BATCH))
        b = net.batch
        for start in range(0, n, b):
            chunk = x[start:start + b]
            if len(chunk) == b:
                net.logits_of(chunk, out[start:start + b])
                continue
            padded = np.empty((b,) + x.shape[1:], np.float32)  # padding: the first image again
            padded[:len(chunk)], padded[len(chunk):] = chunk, chunk[0]
            logits = np.empty((b, self.classes), np.float32)
            net.logits_of(padded, logits)
            out[start:] = logits[:len(chunk)]
        return out

    def evaluate(self, data=None, split="test", data_dir=None):
        """Mean cross-entropy, accuracy and item count over a dataset split
        as `cuttle eval` computes them (data None: the dataset the model
        was trained on)."""
        self._check_open()
        data = data or self.dataset
        if data is None:
            raise ValueError(f"cuttle: {self.name} names no dataset it was trained on; give data=")
        dataset = Dataset(data, split, data_dir)
        try:
            if dataset.image_shape != self.input_shape:
                raise ValueError(f"cuttle: {data} has images {dataset.image_shape}; "
                                 f"{self.name} takes {self.input_shape}")
            n = len(dataset)
            loss, accuracy = evaluate(self._predictor_for(min(n, EVAL_BATCH)), dataset)
        finally:
            dataset.close()
        return {"loss": loss, "accuracy": accuracy, "n": n}

    def _check_images(self, x):
        if not isinstance(x, np.ndarray):
            raise TypeError(f"cuttle: images must be a numpy array, got {type(x).__name__}")
        if x.dtype != np.float32:
            raise TypeError(f"cuttle: images must be float32, got {x.dtype} (use "
                            f"x.astype(np.float32))")
        want = "[N, %d, %d, %d]" % self.input_shape
        if x.ndim != 4 or x.shape[1:] != self.input_shape:
            raise ValueError(f"cuttle: images must be {want} for {self.name}, got shape "
                             f"{list(x.shape)}")
        return np.ascontiguousarray(x)

    def _predictor_for(self, batch):
        """The optimized inference net of that batch with the current weights."""
        if self._predictor is None or self._predictor.batch != batch:
            if self._predictor is not None:
                self._predictor.close()
                self._predictor = None
            net = self._copy(batch)
            try:
                net.optimize()
            except BaseException:
                net.close()
                raise
            self._predictor = net
        return self._predictor

    def _copy(self, batch):
        """A new net of the model on `batch` images, with its weights."""
        info = self._info
        net = Net(info.text, info.input_shape, info.classes, batch)
        try:
            net.make_plan(self._backend, 1)
            net.copy_state_from(self._net)
        except BaseException:
            net.close()
            raise
        return net

    def _meta(self):
        """The metadata as a ct_meta array and its length."""
        pairs = self._info.meta()
        return (Meta * len(pairs))(*[Meta(k.encode(), v.encode()) for k, v in pairs]), len(pairs)

    # ---- weights ----

    def state_dict(self):
        """Parameters and buffers as NumPy arrays under PyTorch's names
        (float32; num_batches_tracked int64), in the model's order."""
        self._check_open()
        return {name: self._net.read(tensor) for name, tensor in self._net.state()}

    def load_state_dict(self, state):
        """Set every parameter and buffer from a mapping of arrays (or
        anything np.asarray takes: CPU torch tensors) with the same names,
        shapes and dtypes, as state_dict gives.  Nothing changes on a
        mismatch."""
        self._check_open()
        arrays, expected = [], self._net.state()
        missing = [name for name, _ in expected if name not in state]
        unexpected = sorted(set(state) - {name for name, _ in expected})
        if missing or unexpected:
            raise ValueError(f"cuttle: load_state_dict: missing {missing}, unexpected "
                             f"{unexpected}")
        for name, tensor in expected:
            shape, dtype = self._net.shape_and_dtype(tensor)
            value = np.asarray(state[name])
            if value.shape != shape or value.dtype != dtype:
                raise ValueError(f"cuttle: load_state_dict: '{name}' is {value.dtype} "
                                 f"{list(value.shape)}; the model's is {np.dtype(dtype)} "
                                 f"{list(shape)}")
            arrays.append((tensor, np.ascontiguousarray(value)))
        for tensor, value in arrays:
            self._net.write(tensor, value)
        if self._predictor is not None:  # built from the old weights
            self._predictor.close()
            self._predictor = None

    def save(self, path):
        """A checkpoint that Model.load and cuttle eval/predict/export read:
        the state_dict and the model's metadata, written atomically."""
        self._check_open()
        meta, n_meta = self._meta()
        check(lib.ct_plan_save(self._net.plan, encode(path), CT_SAVE_MODEL, n_meta, meta))

    def export_onnx(self, path, opset=ONNX_MIN_OPSET, batch=None, softmax=False):
        """The inference graph as an ONNX file (docs/onnx.md) with this model's
        metadata, as cuttle export writes it: a dynamic batch axis, or a fixed
        `batch`; `softmax` ends it with probabilities instead of logits."""
        self._check_open()
        if not (isinstance(opset, int) and ONNX_MIN_OPSET <= opset <= ONNX_MAX_OPSET):
            raise ValueError(f"cuttle: opset must be {ONNX_MIN_OPSET} to {ONNX_MAX_OPSET}, "
                             f"got {opset!r}")
        if batch is not None and not (isinstance(batch, int) and batch >= 1):
            raise ValueError(f"cuttle: batch must be None (dynamic) or a positive int, got "
                             f"{batch!r}")
        net = self._net if batch is None else self._copy(batch)
        try:
            meta, n_meta = self._meta()
            args = OnnxExportArgs(opset, batch is not None, softmax, self.name.encode(), n_meta,
                                  meta)
            check(lib.ct_onnx_export(net.plan, net.x, net.logits, ctypes.byref(args),
                                     encode(path)))
        finally:
            if net is not self._net:
                net.close()
