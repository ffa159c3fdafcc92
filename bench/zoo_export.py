#!/usr/bin/python3
"""zoo_export.py — export the torchvision classification zoo to ONNX, random weights.

Run with the interpreter that has torch + torchvision (Debian's /usr/bin/python3:
torch 1.13, torchvision 0.14). Two sets, one model per family in each:

  * full:  the smallest model of every classification family torchvision 0.14
           ships (resnet18, regnet_x_400mf, swin_t, vit_b_16, ...), 224x224
           (inception_v3: 299x299), 1000 classes: what bench/zoo.py times;
  * small: the same torchvision classes with a reduced configuration (fewer
           blocks, narrower, 32x32 to 75x75 images, 10 classes): what CI
           checks (the zoo_* tests, tests/models/CMakeLists.txt). GoogLeNet and Inception v3
           take no size arguments, so their small variants are a stem plus
           torchvision's own Inception blocks (googlenet.Inception,
           inception.InceptionA..C) at small widths. Wide ResNet has none
           (mini_resnext runs its Bottleneck class).

Every model is exported the way models/export.py exports its set (its
calibrate_batchnorm, seed and opset are imported from there): torch.manual_seed(0),
BatchNorm statistics measured on a random batch, eval mode, opset 17, constant
folding, input "input" [N,3,H,W] float32 with a symbolic batch N, output "output".
Parameters that torchvision initialises to one constant (ViT's zero head and class
token, ConvNeXt's 1e-6 layer scale, zero biases, unit norm weights) get random
values as well, so that the outputs depend on every layer and are not ~0 (a ViT
with its zero head outputs exactly 0 whatever Kiln computes).
Files are written atomically; an existing file is kept unless --force.

    /usr/bin/python3 bench/zoo_export.py --set full|small --out DIR [--only a,b] [--force] [--list]

Prints one JSON line per model: {"name", "family", "path", "params", "input", "seconds", "kept"}.
"""
import argparse
import json
import os
import sys
import tempfile
import time
from functools import partial

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# torch is imported where a model is built, so that --list runs with any python3
# (CMake lists the small set at configure time with the test interpreter).


def tv(name):
    def make():
        import torchvision
        return getattr(torchvision.models, name)(weights=None)
    return make


# ---- small variants: torchvision's classes, reduced configurations ---------------------------

def small_resnet():
    from torchvision.models.resnet import BasicBlock, ResNet
    return ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10)


def small_resnext():
    from torchvision.models.resnet import Bottleneck, ResNet
    return ResNet(Bottleneck, [1, 1, 1, 1], groups=4, width_per_group=4, num_classes=10)


def small_regnet(se_ratio):
    from torchvision.models.regnet import BlockParams, RegNet
    params = BlockParams.from_init_params(depth=4, w_0=16, w_a=8.0, w_m=2.0, group_width=8,
                                          se_ratio=se_ratio)
    return RegNet(params, num_classes=10, stem_width=16)


def small_mobilenet_v2():
    from torchvision.models.mobilenetv2 import MobileNetV2
    setting = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 1, 2], [6, 64, 1, 2]]
    return MobileNetV2(num_classes=10, width_mult=0.5, inverted_residual_setting=setting)


def small_mobilenet_v3():
    from torchvision.models.mobilenetv3 import MobileNetV3, _mobilenet_v3_conf
    setting, _ = _mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.5)
    # C1 (SE, ReLU), C2 (no SE) and C3 (SE, hardswish)
    return MobileNetV3(setting[:5], last_channel=128, num_classes=10)


def small_efficientnet():
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf
    setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.25)
    # the first four stages: 3x3 and 5x5 depthwise, expand ratio 1 and 6, squeeze-excite
    return EfficientNet(setting[:4], dropout=0.2, num_classes=10, last_channel=last)


def small_efficientnet_v2():
    import torch.nn as nn
    from torchvision.models.efficientnet import EfficientNet, FusedMBConvConfig, MBConvConfig
    setting = [FusedMBConvConfig(1, 3, 1, 16, 16, 1), FusedMBConvConfig(4, 3, 2, 16, 24, 1),
               MBConvConfig(4, 3, 2, 24, 32, 2, width_mult=1.0, depth_mult=1.0)]
    return EfficientNet(setting, dropout=0.2, num_classes=10, last_channel=128,
                        norm_layer=partial(nn.BatchNorm2d, eps=1e-03))


def small_mnasnet():
    from torchvision.models.mnasnet import MNASNet
    return MNASNet(0.25, num_classes=10)


def small_shufflenet():
    from torchvision.models.shufflenetv2 import ShuffleNetV2
    return ShuffleNetV2([2, 1, 1], [8, 16, 32, 64, 128], num_classes=10)


def small_squeezenet():
    from torchvision.models.squeezenet import SqueezeNet
    return SqueezeNet("1_0", num_classes=10)


def small_densenet():
    from torchvision.models.densenet import DenseNet
    return DenseNet(growth_rate=8, block_config=(3, 2), num_init_features=16, bn_size=2,
                    num_classes=10)


def small_googlenet():
    """GoogLeNet's stem, two of its Inception blocks (1x1 / 3x3 / "5x5" / pool
    branches concatenated) with its max pool between, and its head."""
    import torch
    import torch.nn as nn
    from torchvision.models.googlenet import BasicConv2d, Inception

    class SmallGoogLeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = BasicConv2d(3, 16, kernel_size=7, stride=2, padding=3)
            self.pool1 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
            self.inc3a = Inception(16, 8, 8, 16, 4, 8, 8)
            self.pool3 = nn.MaxPool2d(3, stride=2, ceil_mode=True)
            self.inc4a = Inception(40, 16, 8, 16, 4, 8, 8)
            self.fc = nn.Linear(48, 10)

        def forward(self, x):
            x = self.inc4a(self.pool3(self.inc3a(self.pool1(self.conv1(x)))))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))
    return SmallGoogLeNet()


def small_inception_v3():
    """A stem and Inception v3's blocks A, B and C (torchvision.models.inception)
    at a reduced input width, 75x75 (the smallest size Inception3 accepts).
    InceptionE, whose 2048 output channels are fixed (~5M weights), is left
    out: its 1x3 / 3x1 branches are the kind of InceptionC's 1x7 / 7x1 ones;
    and InceptionD, a stride-2 reduction as InceptionB is."""
    import torch
    import torch.nn as nn
    from torchvision.models.inception import BasicConv2d, InceptionA, InceptionB, InceptionC

    class SmallInception3(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(BasicConv2d(3, 16, kernel_size=3, stride=2),
                                      nn.MaxPool2d(3, stride=2))
            self.a = InceptionA(16, pool_features=8)    # 64 + 64 + 96 + 8 = 232
            self.b = InceptionB(232)                    # 384 + 96 + 232 = 712
            self.c = InceptionC(712, channels_7x7=16)   # 768
            self.fc = nn.Linear(768, 10)

        def forward(self, x):
            x = self.c(self.b(self.a(self.stem(x))))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))
    return SmallInception3()


def small_convnext():
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    return ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 2)], num_classes=10)


def small_swin():
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                           window_size=[4, 4], num_classes=10)


def small_vit():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                             mlp_dim=64, num_classes=10)


def img(size):
    return (1, 3, size, size)


# family -> (full name, full constructor, full input shape, small constructor, small shape)
FAMILIES = {
    "resnet": ("resnet18", tv("resnet18"), img(224), small_resnet, img(32)),
    "resnext": ("resnext50_32x4d", tv("resnext50_32x4d"), img(224), small_resnext, img(32)),
    # no small variant: ResNet fixes the stage widths, so even one Bottleneck per stage at
    # width 128 has 19.5M weights; mini_resnext runs the same Bottleneck class
    "wide_resnet": ("wide_resnet50_2", tv("wide_resnet50_2"), img(224), None, None),
    "regnet_x": ("regnet_x_400mf", tv("regnet_x_400mf"), img(224),
                 partial(small_regnet, None), img(32)),
    "regnet_y": ("regnet_y_400mf", tv("regnet_y_400mf"), img(224),
                 partial(small_regnet, 0.25), img(32)),
    "mobilenet_v2": ("mobilenet_v2", tv("mobilenet_v2"), img(224), small_mobilenet_v2, img(32)),
    "mobilenet_v3": ("mobilenet_v3_small", tv("mobilenet_v3_small"), img(224),
                     small_mobilenet_v3, img(32)),
    "efficientnet": ("efficientnet_b0", tv("efficientnet_b0"), img(224), small_efficientnet,
                     img(32)),
    "efficientnet_v2": ("efficientnet_v2_s", tv("efficientnet_v2_s"), img(224),
                        small_efficientnet_v2, img(32)),
    "mnasnet": ("mnasnet0_5", tv("mnasnet0_5"), img(224), small_mnasnet, img(32)),
    "shufflenet_v2": ("shufflenet_v2_x0_5", tv("shufflenet_v2_x0_5"), img(224), small_shufflenet,
                      img(32)),
    "squeezenet": ("squeezenet1_0", tv("squeezenet1_0"), img(224), small_squeezenet, img(48)),
    "densenet": ("densenet121", tv("densenet121"), img(224), small_densenet, img(32)),
    "googlenet": ("googlenet", tv("googlenet"), img(224), small_googlenet, img(32)),
    "inception_v3": ("inception_v3", tv("inception_v3"), img(299), small_inception_v3, img(75)),
    "convnext": ("convnext_tiny", tv("convnext_tiny"), img(224), small_convnext, img(32)),
    "swin": ("swin_t", tv("swin_t"), img(224), small_swin, img(32)),
    "vit": ("vit_b_16", tv("vit_b_16"), img(224), small_vit, img(32)),
}


def models_of(which):
    """{model name: (family, constructor, input shape)} of the 'full' or 'small' set."""
    out = {}
    for family, (full, make_full, shape_full, make_small, shape_small) in FAMILIES.items():
        if which == "full":
            out[full] = (family, make_full, shape_full)
        elif make_small:
            out["mini_" + family] = (family, make_small, shape_small)
    return out


def randomize_constant_params(model):
    """Gives every parameter that is one repeated value (zero biases, unit
    LayerNorm weights, ViT's zero head and class token, ConvNeXt's 1e-6 layer
    scale) random values of a sensible size; BatchNorm is left to
    calibrate_batchnorm. Random-init parameters are left alone."""
    import torch
    import torch.nn as nn
    bn_params = {id(p) for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)
                 for p in m.parameters()}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if id(p) in bn_params or p.numel() < 2 or not torch.all(p == p.flatten()[0]):
                continue
            value = float(p.flatten()[0])
            if "layer_scale" in name:
                nn.init.uniform_(p, 0.2, 0.6)
            elif value == 1.0:
                nn.init.uniform_(p, 0.5, 1.5)
            elif p.dim() >= 2 and "token" not in name:
                nn.init.normal_(p, std=1.0 / max(1, p[0].numel()) ** 0.5)
            else:
                nn.init.normal_(p, std=0.1 if p.dim() == 1 else 0.5)


def export_one(name, make, shape, out_dir, force=False):
    """Exports one model to out_dir/name.onnx; returns (path, params, seconds, kept)."""
    path = os.path.join(out_dir, name + ".onnx")
    if os.path.exists(path) and not force:
        return path, None, 0.0, True
    import torch
    sys.path.insert(0, os.path.join(REPO, "models"))
    from export import OPSET, SEED, calibrate_batchnorm
    t0 = time.time()
    torch.manual_seed(SEED)
    model = make().eval()
    randomize_constant_params(model)
    calibrate_batchnorm(model, shape)
    params = sum(p.numel() for p in model.parameters())
    example = torch.randn(shape)
    fd, tmp = tempfile.mkstemp(prefix="." + name + ".", suffix=".onnx.tmp", dir=out_dir)
    os.close(fd)
    try:
        # not under torch.no_grad(): there nn.MultiheadAttention (ViT) takes its fused
        # fast path, aten::_native_multi_head_attention, which has no ONNX export
        torch.onnx.export(model, (example,), tmp, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "N"}, "output": {0: "N"}},
                          opset_version=OPSET, do_constant_folding=True)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path, params, time.time() - t0, False


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", choices=["full", "small"], default="full")
    ap.add_argument("--out", required=True, help="output folder (created)")
    ap.add_argument("--only", default="", help="comma-separated model or family names")
    ap.add_argument("--force", action="store_true", help="re-export models that exist")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    args = ap.parse_args(argv)

    models = models_of(args.set)
    if args.list:
        for name, (family, _, shape) in models.items():
            print(f"{name:20s} {family:16s} input{list(shape)}")
        return 0
    wanted = [n for n in args.only.split(",") if n]
    unknown = [n for n in wanted if n not in models and n not in FAMILIES]
    if unknown:
        print(f"zoo_export.py: error: unknown model(s): {', '.join(unknown)} "
              f"(known: {', '.join(models)}; families: {', '.join(FAMILIES)})", file=sys.stderr)
        return 2
    names = [n for n, (family, _, _) in models.items()
             if not wanted or n in wanted or family in wanted]
    os.makedirs(args.out, exist_ok=True)
    import torch
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    status = 0
    for name in names:
        family, make, shape = models[name]
        try:
            path, params, secs, kept = export_one(name, make, shape, args.out, args.force)
        except Exception as e:  # one family failing to export must not hide the others
            print(f"zoo_export.py: {name}: export failed: {type(e).__name__}: {e}", file=sys.stderr)
            status = 1
            continue
        print(json.dumps({"name": name, "family": family, "path": path, "params": params,
                          "input": list(shape), "seconds": round(secs, 2), "kept": kept}),
              flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
