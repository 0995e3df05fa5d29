"""The built-in models of cuttle (models/*.model) in PyTorch, with the same
parameter names, shapes and outputs:

    import torch_models
    model = torch_models.build("resnet18", channels=3, height=32, width=32, classes=10)

VGG and ResNet come from torchvision.models (so the names are torchvision's)
with the changes that the model files make for small inputs (both sides under
64 px): ResNet's CIFAR stem (3x3 conv, stride 1, no max pool); VGG's
classifier on the 512x1x1 features (512 -> 512 -> classes) and no fifth max
pool when its input is already 1x1 (28x28 inputs).  Larger VGG inputs are
torchvision's network, accepted only where its AdaptiveAvgPool2d(7) is an
identity (7x7 features: inputs of 224 to 255 px), as in models/vgg*.model.
Run with Debian's python3-torch and python3-torchvision (/usr/bin/python3);
simplecnn and lenet5 need only torch.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

NAMES = ["simplecnn", "lenet5", "vgg8_bn", "vgg11", "vgg11_bn", "vgg16", "vgg16_bn",
         "resnet18", "resnet34", "resnet50"]
SMALL_INPUT = 64  # under this (height and width): the small-input variants


class SimpleCNN(nn.Module):
    """models/simplecnn.model and ct_model_simplecnn."""

    def __init__(self, channels, height, width, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        side_h, side_w = ((height - 4) // 2 - 4) // 2, ((width - 4) // 2 - 4) // 2
        self.fc1 = nn.Linear(16 * side_h * side_w, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class LeNet5(nn.Module):
    """models/lenet5.model: tanh, average pooling, 28x28 inputs padded by 2."""

    def __init__(self, channels, height, width, classes):
        super().__init__()
        pad = 2 if height < 32 else 0
        self.conv1 = nn.Conv2d(channels, 6, 5, padding=pad)
        self.conv2 = nn.Conv2d(6, 16, 5)
        side_h = ((height + 2 * pad - 4) // 2 - 4) // 2
        side_w = ((width + 2 * pad - 4) // 2 - 4) // 2
        self.fc1 = nn.Linear(16 * side_h * side_w, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def forward(self, x):
        x = F.avg_pool2d(torch.tanh(self.conv1(x)), 2)
        x = F.avg_pool2d(torch.tanh(self.conv2(x)), 2)
        x = x.flatten(1)
        x = torch.tanh(self.fc1(x))
        x = torch.tanh(self.fc2(x))
        return self.fc3(x)


class VGG8BN(nn.Module):
    """models/vgg8_bn.model: three stages of two 3x3 conv+BN+ReLU (32, 64,
    128 channels) and a 2x2 max pool, then Dropout(0.3) Linear(256) ReLU
    Dropout(0.3) Linear(classes)."""

    def __init__(self, channels, height, width, classes):
        super().__init__()
        layers, inputs = [], channels
        for width_out in (32, 64, 128):
            for _ in range(2):
                layers += [nn.Conv2d(inputs, width_out, 3, padding=1, bias=False),
                           nn.BatchNorm2d(width_out), nn.ReLU(inplace=True)]
                inputs = width_out
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        features = 128 * (height // 8) * (width // 8)
        self.classifier = nn.Sequential(
            nn.Dropout(0.3), nn.Linear(features, 256), nn.ReLU(inplace=True),
            nn.Dropout(0.3), nn.Linear(256, classes))

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def small(height, width):
    return height < SMALL_INPUT and width < SMALL_INPUT


def vgg(name, channels, height, width, classes):
    import torchvision
    model = getattr(torchvision.models, name)(weights=None, num_classes=classes)
    first = model.features[0]
    if channels != first.in_channels:
        model.features[0] = nn.Conv2d(channels, first.out_channels, 3, padding=1)
    side_h, side_w = height, width  # follow the features' size through the pools
    for i, module in enumerate(model.features):
        if isinstance(module, nn.MaxPool2d):
            if side_h == 1 and side_w == 1:
                model.features[i] = nn.Identity()
            else:
                side_h, side_w = side_h // 2, side_w // 2
    if small(height, width):
        model.avgpool = nn.Identity()
        model.classifier = nn.Sequential(
            nn.Linear(512 * side_h * side_w, 512), nn.ReLU(True), nn.Dropout(0.5),
            nn.Linear(512, 512), nn.ReLU(True), nn.Dropout(0.5),
            nn.Linear(512, classes))
    elif (side_h, side_w) != (7, 7):
        raise ValueError("torchvision's VGG needs 7x7 features (inputs of 224 to 255 px), "
                         "got %dx%d from %dx%d" % (side_h, side_w, height, width))
    return model


def resnet(name, channels, height, width, classes):
    import torchvision
    model = getattr(torchvision.models, name)(weights=None, num_classes=classes)
    if small(height, width):
        model.conv1 = nn.Conv2d(channels, 64, 3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    elif channels != 3:
        model.conv1 = nn.Conv2d(channels, 64, 7, stride=2, padding=3, bias=False)
    return model


def build(name, channels, height, width, classes):
    """The PyTorch twin of cuttle's built-in model `name` on inputs
    [N, channels, height, width] with `classes` outputs."""
    if name == "simplecnn":
        return SimpleCNN(channels, height, width, classes)
    if name == "lenet5":
        return LeNet5(channels, height, width, classes)
    if name == "vgg8_bn":
        return VGG8BN(channels, height, width, classes)
    if name.startswith("vgg"):
        return vgg(name, channels, height, width, classes)
    if name.startswith("resnet"):
        return resnet(name, channels, height, width, classes)
    raise ValueError("unknown model %r; known: %s" % (name, ", ".join(NAMES)))


def randomize_batchnorm(model):
    """Random affine parameters and running statistics for every batchnorm
    layer (from torch's current seed), so that evaluation mode does more than
    divide by sqrt(1 + eps): what the tests compare against."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.5, 0.5)
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 1.5)
                module.num_batches_tracked.fill_(3)
