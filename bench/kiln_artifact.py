"""kiln_artifact.py — the bench scripts' name for the kiln package
(python/kiln, docs/python.md): the ctypes wrapper of a Kiln .so artifact
lives there, once; this module puts ../python first on sys.path and
re-exports it under the names the scripts use:

    from kiln_artifact import Artifact
    art = Artifact("out/resnet18.so")
    (logits,) = art.run(x, threads=2)     # raw ABI buffers, in input order
    call, outs = art.prepare(x)            # bind once; call() runs once (what a benchmark times)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from kiln.abi import ABI_VERSION, STATUS, Descriptor, Pipe, Step, TensorDesc  # noqa: E402,F401
from kiln.model import Model as Artifact, Tensor  # noqa: E402,F401
