"""Factories for tools/torch_export.py: torchvision architectures (random weights come from
--random-weights) and models that exercise the importer's refusals."""

import torch
from torch import nn


def _tv():
    import torchvision.models as models
    return models


def resnet18():
    return _tv().resnet18()


def mobilenet_v2():
    return _tv().mobilenet_v2()


def squeezenet1_0():
    return _tv().squeezenet1_0()


def mobilenet_v3_small():
    return _tv().mobilenet_v3_small()


def efficientnet_b0():
    return _tv().efficientnet_b0()


def shufflenet_v2_x0_5():
    return _tv().shufflenet_v2_x0_5()


def densenet121():
    return _tv().densenet121()


def convnext_tiny():
    return _tv().convnext_tiny()


def vit_b_16():
    return _tv().vit_b_16()


def upsampler():
    """A transposed convolution: not supported by the importer (a typed refusal)."""
    return nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.ConvTranspose2d(4, 2, 2, stride=2))


def mlp_1mb():
    """256-512-256-10: 265,482 f32 parameters, 1.06 MB of weights (the import-time goal's size)."""
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))


def __getattr__(name):
    """Any other torchvision classification architecture by its torchvision name (mobilenet_v3_large,
    resnet50, regnet_y_400mf, mnasnet1_0, ...), for measuring models nobody tuned for."""
    models = _tv()
    if name.startswith("_") or not callable(getattr(models, name, None)):
        raise AttributeError(f"module 'torchvision_zoo' has no attribute {name!r}")
    return getattr(models, name)
