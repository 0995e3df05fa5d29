"""cuttle.train: the training loop of `cuttle train` (tools/cmd_train.c) over
the C API, so that the same options and seed give the same weights."""
import ctypes
import math
import time

import numpy as np

from . import schedule as schedules
from ._info import Info
from ._lib import (Augment, Error, LoaderArgs, P, SgdArgs, check, check_ptr,
                   CT_TRAIN, lib)
from ._net import Backend, Net
from .data import Dataset, evaluate
from .model import Model

EVAL_BATCH = 500
OPTIMIZERS = ("sgd", "adam", "adamw")
SGD_PEAK_LR, SGD_MOMENTUM, SGD_WEIGHT_DECAY = 0.05, 0.9, 5e-4
ADAM_LR, ADAMW_PEAK_LR, ADAMW_WEIGHT_DECAY = 1e-3, 0.002, 0.01
DEFAULT_CROP_PAD, DEFAULT_CUTOUT, MAX_AUGMENT_SIZE = 4, 8, 1024


def train(model="simplecnn", data="fashion-mnist", data_dir=None, epochs=15, batch=64,
          optim="sgd", lr=None, schedule="onecycle", momentum=SGD_MOMENTUM,
          weight_decay=None, label_smoothing=0.0, augment="none", seed=1, device="cpu",
          workers=1, max_steps=None, callback=None):
    """Train a model as `cuttle train` does with the same options (the
    default recipe: SGD with Nesterov momentum, a one-cycle rate peaking at
    0.05, weight decay 5e-4, batch 64), evaluating on the test split after
    each epoch, and return the trained Model.

    callback(metrics) is called after each epoch with a dict of the fields
    of a metrics.jsonl line: epoch, train_loss, train_accuracy, test_loss,
    test_accuracy, seconds, images_per_second, lr, and partial (True when
    max_steps stopped the epoch early).  max_steps stops after that many
    steps in all (the schedule still spans all epochs), as --max-steps."""
    options = dict(locals())
    if optim not in OPTIMIZERS:
        raise ValueError(f"cuttle: optim '{optim}' is not known; choose one of "
                         f"{', '.join(OPTIMIZERS)}")
    if schedule not in schedules.NAMES:
        raise ValueError(f"cuttle: schedule '{schedule}' is not known; choose one of "
                         f"{', '.join(schedules.NAMES)}")
    for name, value, low in (("epochs", epochs, 1), ("batch", batch, 1), ("workers", workers, 1),
                             ("seed", seed, 0)):
        if not isinstance(value, int) or value < low:
            raise ValueError(f"cuttle: {name} must be a whole number from {low}, got {value!r}")
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise ValueError(f"cuttle: max_steps must be None or a positive int, got {max_steps!r}")
    if lr is None:
        options["lr"] = {"sgd": SGD_PEAK_LR, "adam": ADAM_LR, "adamw": ADAMW_PEAK_LR}[optim]
    if weight_decay is None:
        options["weight_decay"] = {"sgd": SGD_WEIGHT_DECAY, "adam": 0.0,
                                   "adamw": ADAMW_WEIGHT_DECAY}[optim]
    run = _Run(options)
    try:
        return run.train()
    finally:
        run.close()


def parse_augment(text):
    """"none" or a comma list of crop[:PAD], flip, cutout[:SIZE] (as --augment)."""
    out = Augment()
    if text == "none":
        return out
    for item in text.split(","):
        name, colon, value = item.partition(":")
        if colon and not (value.isdigit() and 1 <= int(value) <= MAX_AUGMENT_SIZE):
            name = ""
        if name == "crop":
            out.crop_pad = int(value) if colon else DEFAULT_CROP_PAD
        elif name == "cutout":
            out.cutout = int(value) if colon else DEFAULT_CUTOUT
        elif name == "flip" and not colon:
            out.hflip = True
        else:
            raise ValueError(f"cuttle: augment '{text}' is not understood; use none or a comma "
                             f"list of crop[:PAD], flip, cutout[:SIZE] (e.g. crop:4,flip)")
    return out


class _Run:
    """What a run holds, freed by close() in the reverse order of making."""

    def __init__(self, options):
        self.o = options
        self.train_data = self.test_data = self.backend = self.net = self.eval_net = None
        self.loader = None

    def close(self):
        if self.loader:
            lib.ct_loader_free(self.loader)
        for held in (self.eval_net, self.net, self.backend, self.test_data, self.train_data):
            if held:
                held.close()

    def setup(self):
        o = self.o
        augment = parse_augment(o["augment"])
        self.train_data = Dataset(o["data"], "train", o["data_dir"])
        self.test_data = Dataset(o["data"], "test", o["data_dir"])
        if o["batch"] > len(self.train_data):
            raise ValueError(f"cuttle: batch {o['batch']} is larger than the "
                             f"{len(self.train_data)} training images")
        self.info = Info.from_dataset(o["model"], o["data"], self.train_data.handle)
        self.backend = Backend(o["device"])
        self._make_trainer()
        loader_args = LoaderArgs(batch=o["batch"], shuffle=True, drop_last=True, augment=augment,
                                 seed=o["seed"], n_threads=o["workers"], shard=0, n_shards=1)
        loader = P()
        check(lib.ct_loader_new(self.train_data.handle, ctypes.byref(loader_args),
                                ctypes.byref(loader)))
        self.loader = loader
        info = self.info
        self.eval_net = Net(info.text, info.input_shape, info.classes,
                            min(len(self.test_data), EVAL_BATCH))
        self.eval_net.make_plan(self.backend, 1)

    def _make_trainer(self):
        o, info = self.o, self.info
        net = self.net = Net(info.text, info.input_shape, info.classes, o["batch"], labels=True)
        self.loss = check_ptr(lib.ct_cross_entropy(net.graph, net.logits, net.labels,
                                                   o["label_smoothing"]), net.graph)
        check(lib.ct_graph_backward(net.graph, self.loss))
        if o["optim"] == "sgd":
            check(lib.ct_graph_sgd(net.graph, SgdArgs(lr=o["lr"], momentum=o["momentum"],
                                                      weight_decay=o["weight_decay"],
                                                      nesterov=o["momentum"] > 0)))
        else:
            adam = lib.ct_adam_defaults()
            adam.lr, adam.weight_decay = o["lr"], o["weight_decay"]
            adam.decoupled = o["optim"] == "adamw"
            check(lib.ct_graph_adam(net.graph, adam))
        net.make_plan(self.backend, o["seed"])

    def train(self):
        self.setup()
        o = self.o
        steps_per_epoch = lib.ct_loader_batches(self.loader)
        total_steps = steps_per_epoch * o["epochs"]
        for epoch in range(1, o["epochs"] + 1):
            metrics = self._epoch(epoch, steps_per_epoch, total_steps)
            if o["callback"] is not None:
                o["callback"](metrics)
            if o["max_steps"] and lib.ct_plan_step(self.net.plan) >= o["max_steps"]:
                break
        model = Model._from_net(self.info, self.backend, self.net)
        self.backend = None  # the model owns it now
        return model

    def _epoch(self, epoch, steps_per_epoch, total_steps):
        o, net, plan = self.o, self.net, self.net.plan
        images, labels, n = P(), P(), ctypes.c_int()
        loss = np.zeros(1, np.float32)
        logits = np.empty((o["batch"], net.classes), np.float32)
        loss_sum, correct, steps = 0.0, 0, 0
        start = time.monotonic()
        check(lib.ct_loader_start(self.loader, epoch, 0))

        def next_batch(ahead):
            """The loader's next batch, staged for a later step (ct_plan_stage: on
            a GPU its copy runs beside the step before it); 0 at the epoch's end
            or where max_steps leaves no room for it."""
            if o["max_steps"] and lib.ct_plan_step(plan) + ahead >= o["max_steps"]:
                return 0
            check(lib.ct_loader_next(self.loader, ctypes.byref(images), ctypes.byref(labels),
                                     ctypes.byref(n)))
            if n.value:
                check(lib.ct_plan_stage(plan, net.x, images, lib.ct_tensor_bytes(net.x)))
                check(lib.ct_plan_stage(plan, net.labels, labels,
                                        lib.ct_tensor_bytes(net.labels)))
            return n.value

        count = next_batch(0)
        while count:
            # this step's labels, before the loader moves on to the next batch
            batch_labels = np.ctypeslib.as_array(ctypes.cast(labels, ctypes.POINTER(
                ctypes.c_int64)), (o["batch"],)).copy()
            count = next_batch(1)  # batch j + 1, staged before step j runs
            lib.ct_plan_set_lr(plan, schedules.learning_rate(o["schedule"], o["lr"],
                                                            lib.ct_plan_step(plan), total_steps))
            check(lib.ct_plan_run(plan, CT_TRAIN))
            check(lib.ct_plan_read(plan, self.loss, loss.ctypes.data_as(P), loss.nbytes))
            check(lib.ct_plan_read_f32(plan, net.logits, logits.ctypes.data_as(P), logits.size))
            if not math.isfinite(loss[0]):
                raise Error(f"cuttle: the loss is {loss[0]} at step {lib.ct_plan_step(plan) - 1}:"
                            f" training diverged; try a lower lr", "CT_ERR_STATE")
            loss_sum += float(loss[0])
            correct += int((logits.argmax(axis=1) == batch_labels).sum())
            steps += 1
        train_seconds = time.monotonic() - start
        self.eval_net.copy_state_from(net)
        test_loss, test_accuracy = evaluate(self.eval_net, self.test_data)
        images_seen = steps * o["batch"]
        return {"epoch": epoch, "train_loss": loss_sum / max(steps, 1),
                "train_accuracy": correct / max(images_seen, 1), "test_loss": test_loss,
                "test_accuracy": test_accuracy, "seconds": time.monotonic() - start,
                "images_per_second": images_seen / train_seconds if train_seconds > 0 else 0.0,
                "lr": float(lib.ct_plan_lr(plan)), "partial": steps < steps_per_epoch}
