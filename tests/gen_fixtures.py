#!/usr/bin/env python3
"""Write the PyTorch reference fixtures that cuttle's tests compare against.

    /usr/bin/python3 tests/gen_fixtures.py      (needs torch; tested with 1.13 CPU)

writes tests/fixtures/{ops,simplecnn,resblock}.safetensors; tests/fixtures/README.md
says what each holds.  The safetensors format is written by hand here (struct + json),
so no safetensors package is needed.  Everything is float32 (labels int64), seeded,
on one CPU thread, so a rerun on the same torch version gives the same bytes.
"""
import copy
import json
import os
import struct
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
GENERATOR = "tests/gen_fixtures.py (torch %s)" % torch.__version__
DTYPE_NAMES = {torch.float32: "F32", torch.int64: "I64"}
HEADER_ALIGN = 8
N_STEPS = 3


class Fixture:
    """Named tensors in file order, plus string metadata."""

    def __init__(self):
        self.tensors = []
        self.names = set()
        self.metadata = {"generator": GENERATOR}
        self.cases = []  # ops.safetensors: case names in order

    def add(self, name, tensor):
        assert name not in self.names, "duplicate tensor name " + name
        assert tensor.dtype in DTYPE_NAMES, "%s: dtype %s" % (name, tensor.dtype)
        self.names.add(name)
        self.tensors.append((name, tensor.detach().clone().contiguous()))

    def save(self, file_name):
        """Header padded with spaces so the data starts 8-aligned; data back to back."""
        header = {"__metadata__": self.metadata}
        blobs, offset = [], 0
        for name, tensor in self.tensors:
            blob = tensor.numpy().astype(tensor.numpy().dtype.newbyteorder("<")).tobytes()
            header[name] = {
                "dtype": DTYPE_NAMES[tensor.dtype],
                "shape": list(tensor.shape),
                "data_offsets": [offset, offset + len(blob)],
            }
            blobs.append(blob)
            offset += len(blob)
        text = json.dumps(header, separators=(",", ":")).encode("utf-8")
        text += b" " * (-(8 + len(text)) % HEADER_ALIGN)
        path = os.path.join(FIXTURE_DIR, file_name)
        with open(path + ".tmp", "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for blob in blobs:
                f.write(blob)
        os.replace(path + ".tmp", path)
        print("wrote %s: %d tensors, %d bytes" % (path, len(self.tensors), os.path.getsize(path)))


def seed_for(name):
    """A seed per case, so adding a case does not change the others."""
    torch.manual_seed(zlib.crc32(name.encode()))


def uniform(shape, low, high):
    return torch.rand(shape) * (high - low) + low


# ---- (a) single ops -----------------------------------------------------------


def op_case(fx, case, attrs, inputs, fn, extra=None, after=None):
    """Run fn(**inputs, **extra) and backpropagate sum(y * dy) with a random dy.

    inputs: float tensors that get gradients "<case>.d<name>".
    extra:  tensors passed to fn without gradients (labels, running stats).
    after:  names of extra tensors that fn updates in place; stored again as
            "<case>.<name>_out".
    """
    extra = extra or {}
    for name, value in list(inputs.items()) + list(extra.items()):
        fx.add("%s.%s" % (case, name), value)
    leaves = {name: value.clone().requires_grad_(True) for name, value in inputs.items()}
    y = fn(**leaves, **extra)
    dy = torch.randn(y.shape)
    (y * dy).sum().backward()
    fx.add(case + ".dy", dy)
    fx.add(case + ".y", y)
    for name, leaf in leaves.items():
        fx.add("%s.d%s" % (case, name), leaf.grad)
    for name in after or []:
        fx.add("%s.%s_out" % (case, name), extra[name])
    attrs = dict(attrs, inputs=list(inputs), extra=list(extra))
    fx.metadata[case] = json.dumps(attrs)
    fx.cases.append(case)


def conv_case(fx, case, x_shape, w_shape, stride=1, pad=0, dilation=1, groups=1, bias=True):
    seed_for(case)
    pair = lambda v: [v, v] if isinstance(v, int) else list(v)
    fan_in = w_shape[1] * w_shape[2] * w_shape[3]
    inputs = {"x": torch.randn(x_shape), "weight": torch.randn(w_shape) / fan_in ** 0.5}
    if bias:
        inputs["bias"] = torch.randn(w_shape[0]) * 0.1
    attrs = {"op": "conv2d", "stride": pair(stride), "pad": pair(pad),
             "dilation": pair(dilation), "groups": groups, "bias": bias}

    def run(x, weight, bias=None):
        return F.conv2d(x, weight, bias, pair(stride), pair(pad), pair(dilation), groups)

    op_case(fx, case, attrs, inputs, run)


def linear_case(fx, case, batch, n_in, n_out, bias):
    seed_for(case)
    inputs = {"x": torch.randn(batch, n_in), "weight": torch.randn(n_out, n_in) / n_in ** 0.5}
    if bias:
        inputs["bias"] = torch.randn(n_out) * 0.1
    op_case(fx, case, {"op": "linear", "bias": bias}, inputs,
            lambda x, weight, bias=None: F.linear(x, weight, bias))


def pool_case(fx, case, op, x_shape, kernel, stride, pad, count_include_pad=None):
    seed_for(case)
    attrs = {"op": op, "kernel": list(kernel), "stride": list(stride), "pad": list(pad)}
    if op == "maxpool2d":
        run = lambda x: F.max_pool2d(x, kernel, stride, pad)
    else:
        attrs["count_include_pad"] = count_include_pad
        run = lambda x: F.avg_pool2d(x, kernel, stride, pad, count_include_pad=count_include_pad)
    op_case(fx, case, attrs, {"x": torch.randn(x_shape)}, run)


def batchnorm_case(fx, case, training):
    seed_for(case)
    channels = 6
    inputs = {"x": torch.randn(4, channels, 5, 5) * 2 + 0.5,
              "weight": uniform(channels, 0.5, 1.5),
              "bias": torch.randn(channels) * 0.1}
    extra = {"running_mean": torch.randn(channels) * 0.1,
             "running_var": uniform(channels, 0.5, 1.5)}
    attrs = {"op": "batchnorm2d", "training": training, "momentum": 0.1, "eps": 1e-5}

    def run(x, weight, bias, running_mean, running_var):
        return F.batch_norm(x, running_mean, running_var, weight, bias, training, 0.1, 1e-5)

    op_case(fx, case, attrs, inputs, run, extra, after=["running_mean", "running_var"])


def cross_entropy_case(fx, case, label_smoothing):
    seed_for(case)
    n_batch, n_classes = 6, 10
    inputs = {"x": torch.randn(n_batch, n_classes) * 2}
    extra = {"labels": torch.randint(0, n_classes, (n_batch,), dtype=torch.int64)}
    attrs = {"op": "cross_entropy", "label_smoothing": label_smoothing, "reduction": "mean"}
    op_case(fx, case, attrs, inputs,
            lambda x, labels: F.cross_entropy(x, labels, label_smoothing=label_smoothing), extra)


def simple_case(fx, case, attrs, inputs, fn):
    seed_for(case)
    op_case(fx, case, attrs, {name: make() for name, make in inputs.items()}, fn)


def write_ops():
    fx = Fixture()
    conv_case(fx, "conv2d_typical", (3, 3, 32, 32), (6, 3, 5, 5))
    conv_case(fx, "conv2d_rect_stride2", (1, 4, 11, 13), (5, 4, 3, 5), stride=2, pad=2)
    conv_case(fx, "conv2d_dilation2", (2, 3, 12, 12), (4, 3, 3, 3), pad=2, dilation=2)
    conv_case(fx, "conv2d_groups2", (2, 4, 9, 9), (6, 2, 3, 3), pad=1, groups=2)
    conv_case(fx, "conv2d_depthwise", (2, 5, 10, 10), (5, 1, 3, 3), pad=1, groups=5)
    conv_case(fx, "conv2d_1x1_batch7", (7, 8, 6, 6), (4, 8, 1, 1))
    conv_case(fx, "conv2d_nobias", (2, 3, 8, 8), (4, 3, 3, 3), pad=1, bias=False)
    for bias in (True, False):
        for batch in (1, 7):
            case = "linear_%s_b%d" % ("bias" if bias else "nobias", batch)
            linear_case(fx, case, batch, 20, 12, bias)
    pool_case(fx, "maxpool2d_2x2", "maxpool2d", (2, 3, 8, 8), (2, 2), (2, 2), (0, 0))
    pool_case(fx, "maxpool2d_3x3_s2_p1", "maxpool2d", (2, 3, 9, 9), (3, 3), (2, 2), (1, 1))
    pool_case(fx, "maxpool2d_rect", "maxpool2d", (2, 2, 9, 8), (3, 2), (2, 1), (1, 0))
    pool_case(fx, "avgpool2d_2x2", "avgpool2d", (2, 3, 8, 8), (2, 2), (2, 2), (0, 0), True)
    pool_case(fx, "avgpool2d_pad_include", "avgpool2d", (2, 3, 7, 7), (3, 3), (2, 2), (1, 1), True)
    pool_case(fx, "avgpool2d_pad_exclude", "avgpool2d", (2, 3, 7, 7), (3, 3), (2, 2), (1, 1), False)
    simple_case(fx, "adaptive_avgpool1", {"op": "adaptive_avgpool2d", "output_size": [1, 1]},
                {"x": lambda: torch.randn(2, 5, 7, 6)}, lambda x: F.adaptive_avg_pool2d(x, 1))
    for op, fn in (("relu", torch.relu), ("sigmoid", torch.sigmoid), ("tanh", torch.tanh)):
        simple_case(fx, op, {"op": op}, {"x": lambda: torch.randn(3, 4, 5, 6) * 2}, fn)
    batchnorm_case(fx, "batchnorm2d_train", training=True)
    batchnorm_case(fx, "batchnorm2d_eval", training=False)
    simple_case(fx, "add", {"op": "add"},
                {"a": lambda: torch.randn(2, 3, 4, 5), "b": lambda: torch.randn(2, 3, 4, 5)},
                lambda a, b: a + b)
    simple_case(fx, "flatten", {"op": "flatten"}, {"x": lambda: torch.randn(3, 4, 5, 6)},
                lambda x: torch.flatten(x, 1))
    simple_case(fx, "concat3", {"op": "concat", "dim": 1},
                {"x0": lambda: torch.randn(2, 3, 4, 5), "x1": lambda: torch.randn(2, 1, 4, 5),
                 "x2": lambda: torch.randn(2, 4, 4, 5)},
                lambda x0, x1, x2: torch.cat([x0, x1, x2], 1))
    simple_case(fx, "softmax", {"op": "softmax", "dim": 1}, {"x": lambda: torch.randn(4, 10) * 3},
                lambda x: torch.softmax(x, 1))
    cross_entropy_case(fx, "cross_entropy", 0.0)
    cross_entropy_case(fx, "cross_entropy_smooth", 0.1)
    fx.metadata["cases"] = json.dumps(fx.cases)
    fx.save("ops.safetensors")


# ---- (b) SimpleCNN and (c) a small ResNet ------------------------------------------


class SimpleCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class BasicBlock(nn.Module):
    """torchvision's BasicBlock: two 3x3 convs with batchnorm, plus the shortcut."""

    def __init__(self, in_channels, out_channels, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


class ResBlockNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer1 = nn.Sequential(BasicBlock(8, 8, 1))
        self.layer2 = nn.Sequential(BasicBlock(8, 16, 2))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def randomize_batchnorm(model):
    """Non-default BN weights and running stats, so eval and the updates check something."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.weight.copy_(uniform(module.num_features, 0.5, 1.5))
                module.bias.copy_(torch.randn(module.num_features) * 0.1)
                module.running_mean.copy_(torch.randn(module.num_features) * 0.1)
                module.running_var.copy_(uniform(module.num_features, 0.5, 1.5))


def model_fixture(fx, model, x, labels, sgd_args, adamw_args):
    """init, one train step's logits/loss/grads, and N_STEPS of SGD and of AdamW."""
    init = copy.deepcopy(model.state_dict())
    for name, value in init.items():
        fx.add("init." + name, value)
    fx.add("input", x)
    fx.add("labels", labels)
    model.train()
    logits = model(x)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    fx.add("logits", logits)
    fx.add("loss", loss)
    for name, param in model.named_parameters():
        fx.add("grad." + name, param.grad)
    for name, buffer in model.named_buffers():
        fx.add("forward." + name, buffer)
    for prefix, make_optimizer, args in (("sgd", torch.optim.SGD, sgd_args),
                                         ("adamw", torch.optim.AdamW, adamw_args)):
        model.load_state_dict(init)
        optimizer = make_optimizer(model.parameters(), **args)
        for step in range(N_STEPS):
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), labels)
            fx.add("%s.loss.%d" % (prefix, step), loss)
            loss.backward()
            optimizer.step()
        for name, value in model.state_dict().items():
            fx.add("%s.%s" % (prefix, name), value)
        fx.metadata[prefix] = json.dumps(dict(args, steps=N_STEPS, param_groups=1))
    model.load_state_dict(init)
    fx.metadata["state_names"] = json.dumps(list(init))
    fx.metadata["param_names"] = json.dumps([name for name, _ in model.named_parameters()])
    fx.metadata["loss"] = "F.cross_entropy(logits, labels), mean over the batch"
    fx.metadata["mode"] = "train"


# eps 1e-6, not PyTorch's default 1e-8: Adam's first steps move each weight by
# lr * g / (|g| + eps), which for |g| near eps swings with the last bits of g.
# Two correct implementations that sum a gradient in different orders then
# disagree by up to 2% of a step on the few weights whose gradient is ~1e-8
# (we saw 3.4e-4 relative on fc1.weight).  With eps 1e-6 the comparison is
# well conditioned and still checks every term of the update.
ADAMW_ARGS = {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-6, "weight_decay": 1e-2,
              "amsgrad": False}


def write_simplecnn():
    seed_for("simplecnn")
    model = SimpleCNN()
    x = torch.randn(8, 3, 32, 32)
    labels = torch.randint(0, 10, (8,), dtype=torch.int64)
    fx = Fixture()
    fx.metadata["model"] = ("SimpleCNN: pool(relu(conv1 3->6 5x5)), pool(relu(conv2 6->16 5x5)), "
                            "pool = MaxPool2d(2), flatten, relu(fc1 400->120), relu(fc2 120->84), "
                            "fc3 84->10; PyTorch default init")
    sgd = {"lr": 0.05, "momentum": 0.9, "dampening": 0.0, "weight_decay": 5e-4, "nesterov": False}
    model_fixture(fx, model, x, labels, sgd, ADAMW_ARGS)
    fx.save("simplecnn.safetensors")


def write_resblock():
    seed_for("resblock")
    model = ResBlockNet()
    randomize_batchnorm(model)
    x = torch.randn(4, 3, 16, 16)
    labels = torch.randint(0, 10, (4,), dtype=torch.int64)
    fx = Fixture()
    fx.metadata["model"] = (
        "relu(bn1(conv1 3->8 3x3 pad 1)); layer1.0: relu(bn2(conv2(relu(bn1(conv1(x))))) + x), "
        "8->8 3x3 pad 1; layer2.0: the same 8->16 with conv1 stride 2 and shortcut "
        "downsample.1(downsample.0 1x1 stride 2); AdaptiveAvgPool2d(1), flatten, fc 16->10. "
        "Convs have no bias; BatchNorm2d eps 1e-5 momentum 0.1 with random weight, bias and "
        "running stats at init")
    sgd = {"lr": 0.1, "momentum": 0.9, "dampening": 0.0, "weight_decay": 5e-4, "nesterov": True}
    model_fixture(fx, model, x, labels, sgd, ADAMW_ARGS)
    model.eval()
    with torch.no_grad():
        fx.add("eval.logits", model(x))
    fx.save("resblock.safetensors")


def main():
    torch.set_num_threads(1)
    os.makedirs(FIXTURE_DIR, exist_ok=True)
    write_ops()
    write_simplecnn()
    write_resblock()


if __name__ == "__main__":
    main()
