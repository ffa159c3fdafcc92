"""export_models.py — runs models/export.py with the exporter it was written for.

    python3 bench/gpu/export_models.py --out models [--only resnet50,bert]

models/export.py is written for the TorchScript-based torch.onnx.export of
Debian's torch 1.13. Newer torch (2.9 and later) defaults to the dynamo-based
exporter, which writes other graphs (and wants opset 18 or more); the GPU
machine has such a torch and no network, so the model set is exported there.
This passes dynamo=False wherever torch.onnx.export accepts the keyword (and
falls back to torch's default exporter, with a notice, where that fails: a
torch without the old exporter), then calls export.py's own main with the
same arguments.
"""
import functools
import inspect
import os
import sys

import torch

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "models"))


def torchscript_first(export):
    """torch.onnx.export with the TorchScript exporter, else the default one."""
    @functools.wraps(export)
    def call(*args, **kwargs):
        try:
            return export(*args, dynamo=False, **kwargs)
        except Exception as e:  # removed or broken in this torch
            print(f"export_models: TorchScript exporter failed ({type(e).__name__}: {e}); "
                  "using torch's default exporter", file=sys.stderr)
            return export(*args, **kwargs)
    return call


def main(argv=None):
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        torch.onnx.export = torchscript_first(torch.onnx.export)
    import export  # models/export.py, after the patch (it calls torch.onnx.export at run time)
    return export.main(argv)


if __name__ == "__main__":
    sys.exit(main())
