"""kiln — Kiln's artifacts from Python (docs/python.md).

    import kiln
    model = kiln.load("out/tiny_cnn.so", threads=2)
    out = model(input=x)                  # {output name: numpy array}
    kiln.compile("model.onnx", "out/model.so", max_batch=4)

load() dlopens a .so artifact through ctypes and calls its C ABI
(docs/abi.md) with numpy arrays; compile() runs the `kiln` command ($KILN,
else kiln on PATH). Every error is a KilnError: InputError (also a
ValueError) for what the caller gave, RunError (also a RuntimeError) for a
failed run or compile.
"""
from .compiler import compile, kiln_command
from .errors import InputError, KilnError, RunError
from .model import Model, Tensor, load

__version__ = "0.1.0"
__all__ = ["load", "compile", "kiln_command", "Model", "Tensor", "KilnError", "InputError", "RunError"]
