"""What a checkpoint says about its model (tools/run_info.h): the
definition text, the input shape, the normalization and the class names,
stored as "__metadata__" strings of model.safetensors."""
import json
from dataclasses import dataclass, field

from ._lib import Error, lib, model_text

MAX_CHANNELS = 4
MAX_SIDE = 65536


@dataclass
class Info:
    name: str
    text: str
    input_shape: tuple
    classes: int
    class_names: list
    mean: list = field(default_factory=list)
    std: list = field(default_factory=list)
    dataset: str = None

    @classmethod
    def plain(cls, model, classes, input_shape):
        """A model nothing describes: no normalization, classes named by number."""
        shape = check_input_shape(input_shape)
        if not isinstance(classes, int) or classes < 1:
            raise ValueError(f"cuttle: classes must be a positive whole number, got {classes!r}")
        return cls(short_name(model), model_text(model), shape, classes,
                   [str(c) for c in range(classes)], [0.0] * shape[0], [1.0] * shape[0])

    @classmethod
    def from_dataset(cls, model, dataset_name, dataset):
        """A model trained on a dataset's training split (`dataset`: a ct_dataset)."""
        shape = (lib.ct_dataset_channels(dataset), lib.ct_dataset_height(dataset),
                 lib.ct_dataset_width(dataset))
        classes = lib.ct_dataset_classes(dataset)
        names = [lib.ct_dataset_class_name(dataset, c).decode() for c in range(classes)]
        return cls(short_name(model), model_text(model), check_input_shape(shape), classes, names,
                   [lib.ct_dataset_mean(dataset, c) for c in range(shape[0])],
                   [lib.ct_dataset_std(dataset, c) for c in range(shape[0])], dataset_name)

    @classmethod
    def from_checkpoint(cls, checkpoint, path):
        """From a checkpoint's metadata (a ct_checkpoint); `path` is for messages."""
        def get(key, required=True):
            value = lib.ct_checkpoint_meta(checkpoint, key.encode())
            if value is None and required:
                raise bad_meta(path, key, "is missing")
            return None if value is None else value.decode()

        def numbers(key):
            try:
                values = json.loads(get(key))
            except ValueError:
                raise bad_meta(path, key, "is not valid JSON") from None
            if not isinstance(values, list) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                raise bad_meta(path, key, "is not an array of numbers")
            return values

        text, name, dataset = get("model"), get("model_name"), get("dataset", False)
        shape = numbers("input")
        if len(shape) != 3 or not all(1 <= v <= MAX_SIDE for v in shape):
            raise bad_meta(path, "input", "is not [channels, height, width]")
        shape = tuple(int(v) for v in shape)
        mean, std = numbers("mean"), numbers("std")
        if len(mean) != shape[0] or len(std) != shape[0]:
            raise bad_meta(path, "mean", "does not give one value per channel")
        if not all(s > 0 for s in std):
            raise bad_meta(path, "std", "holds a value that is not positive")
        try:
            names = json.loads(get("classes"))
        except ValueError:
            raise bad_meta(path, "classes", "is not valid JSON") from None
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise bad_meta(path, "classes", "is not a list of names")
        return cls(name, text, check_input_shape(shape), len(names), names, mean, std, dataset)

    def meta(self):
        """The metadata pairs cuttle train writes (all but epoch)."""
        pairs = [("cuttle_version", lib.ct_version().decode()), ("model_name", self.name),
                 ("model", self.text), ("input", json.dumps(list(self.input_shape))),
                 ("mean", float_array(self.mean)), ("std", float_array(self.std)),
                 ("classes", json.dumps(self.class_names, ensure_ascii=False))]
        if self.dataset is not None:
            pairs.append(("dataset", self.dataset))
        return pairs


def float_array(values):
    """'[a, b]' with enough digits to read back the same float (as "%.9g")."""
    return "[" + ", ".join("%.9g" % v for v in values) + "]"


def short_name(model):
    """A built-in name, or a model file's name without folder and ".model"."""
    base = str(model).rsplit("/", 1)[-1]
    return base[:-len(".model")] if base.endswith(".model") and base != ".model" else base


def check_input_shape(shape):
    try:
        shape = tuple(int(v) for v in shape)
    except (TypeError, ValueError):
        raise ValueError(f"cuttle: input_shape must be (channels, height, width), got {shape!r}")
    if len(shape) != 3 or not all(1 <= v <= MAX_SIDE for v in shape):
        raise ValueError(f"cuttle: input_shape must be (channels, height, width), each 1 to "
                         f"{MAX_SIDE}, got {shape!r}")
    if shape[0] > MAX_CHANNELS:
        raise ValueError(f"cuttle: {shape[0]} channels; at most {MAX_CHANNELS}")
    return shape


def bad_meta(path, key, why):
    return Error(f"cuttle: {path}: metadata '{key}' {why}; was it written by cuttle train? (a "
                 f"plain state_dict needs model=, input_shape= and classes=)", "CT_ERR_FORMAT")

