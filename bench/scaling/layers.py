# The model of docs/scaling.md: per-layer parameters and forward MACs of
# torchvision's ResNet-50 and VGG-16 at 3x224x224, in forward order, into
# layers.json (read by model.py).  /usr/bin/python3 bench/scaling/layers.py
import json, os, sys

import torch, torchvision
def layers(model):
    # forward-order list of (param names, param count, forward MACs) per conv/linear/bn module
    out = []
    hooks = []
    def hook(mod, inp, outp, name):
        macs = 0
        if isinstance(mod, torch.nn.Conv2d):
            macs = outp.numel() * (mod.in_channels // mod.groups) * mod.kernel_size[0] * mod.kernel_size[1]
        elif isinstance(mod, torch.nn.Linear):
            macs = outp.numel() * mod.in_features
        out.append((name, sum(p.numel() for p in mod.parameters(recurse=False)), macs))
    for name, mod in model.named_modules():
        if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear, torch.nn.BatchNorm2d)):
            hooks.append(mod.register_forward_hook(lambda m, i, o, n=name: hook(m, i, o, n)))
    with torch.no_grad():
        model(torch.zeros(1, 3, 224, 224))
    return out
res = {}
for name, ctor in [("resnet50", torchvision.models.resnet50), ("vgg16", torchvision.models.vgg16)]:
    m = ctor()
    m.eval()
    L = layers(m)
    # param order as in state_dict (module registration order)
    order = [n for n, mod in m.named_modules() if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear, torch.nn.BatchNorm2d))]
    res[name] = {"exec": L, "order": order, "params": sum(p.numel() for p in m.parameters())}
    print(name, res[name]["params"], sum(l[2] for l in L) / 1e9, "GMAC fwd")
json.dump(res, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "layers.json"), "w"))
