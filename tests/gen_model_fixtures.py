#!/usr/bin/env python3
"""Write tests/fixtures/models.json: the state_dict (names and shapes, in
order) of each built-in model's PyTorch twin (bench/peers/torch_models.py)
for each input size that tests/test_models.c builds.

    /usr/bin/python3 tests/gen_model_fixtures.py      (needs torch + torchvision)

The file maps "<model> <C>x<H>x<W>" to [[name, [shape...]], ...], 10 classes.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench", "peers"))
import torch  # noqa: E402
import torchvision  # noqa: E402
import torch_models  # noqa: E402

CLASSES = 10
SMALL_SIZES = [(1, 28, 28), (3, 32, 32)]
LARGE_MODELS = ["resnet18", "resnet50", "vgg11"]  # also built on 3x224x224


def main():
    cases = {}
    for name in torch_models.NAMES:
        sizes = SMALL_SIZES + ([(3, 224, 224)] if name in LARGE_MODELS else [])
        for channels, height, width in sizes:
            model = torch_models.build(name, channels, height, width, CLASSES)
            key = "%s %dx%dx%d" % (name, channels, height, width)
            cases[key] = [[k, list(v.shape)] for k, v in model.state_dict().items()]
    path = os.path.join(HERE, "fixtures", "models.json")
    with open(path + ".tmp", "w") as f:
        f.write('{"generator": "tests/gen_model_fixtures.py (torch %s, torchvision %s)",\n'
                % (torch.__version__, torchvision.__version__))
        f.write(' "classes": %d,\n "models": {\n' % CLASSES)
        f.write(",\n".join('  %s: %s' % (json.dumps(k), json.dumps(v, separators=(",", ":")))
                           for k, v in cases.items()))
        f.write("\n }}\n")
    os.replace(path + ".tmp", path)
    print("wrote %s: %d cases, %d bytes" % (path, len(cases), os.path.getsize(path)))


if __name__ == "__main__":
    main()
