"""kiln_artifact.py — a thin ctypes wrapper over a Kiln .so artifact.

It mirrors include/kiln/artifact.h (ABI version 1.4): dlopen the .so, read the
well-known `kiln_artifact_v1` descriptor, and call its `run` / `set_threads`
entry points with numpy buffers. Nothing else of Kiln is needed. Used by
bench/bench.py so that timings exclude process start and .npy I/O; usable by
anyone who wants to call an artifact from Python:

    from kiln_artifact import Artifact
    art = Artifact("out/resnet18.so")
    (logits,) = art.run(x, threads=2)          # x: float32 [B, 3, 224, 224], B <= max_batch

The wrapper owns one workspace (sized for max_batch, aligned as declared) and
the output buffers of the last batch size; like the C ABI, one Artifact object
must not be run from two threads at once.
"""
import ctypes
import os
import struct

import numpy as np

ABI_VERSION = 1
STATUS = {0: "KILN_OK", 1: "KILN_ERR_BATCH", 2: "KILN_ERR_ARG", 3: "KILN_ERR_THREADS",
          4: "KILN_ERR_CAPACITY", 5: "KILN_ERR_VALUE", 6: "KILN_ERR_DEVICE"}
ONNX_TO_NP = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
              7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
              13: np.uint64}

RUN_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                          ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_int64)
SET_THREADS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)


class TensorDesc(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("dims", ctypes.POINTER(ctypes.c_int64)), ("batch_mask", ctypes.c_uint32)]


class Step(ctypes.Structure):
    _fields_ = [("fn", ctypes.c_void_p), ("name", ctypes.c_char_p), ("nodes", ctypes.c_char_p),
                ("n_args", ctypes.c_int32), ("first_arg", ctypes.c_int32),
                ("parallel", ctypes.c_int32), ("reserved", ctypes.c_int32),
                ("flops", ctypes.c_double)]


class Pipe(ctypes.Structure):
    # ABI 1.3: steps `first` and `first + 1` run as one row pipe
    _fields_ = [("first", ctypes.c_int32), ("batched", ctypes.c_int32), ("rows1", ctypes.c_int32),
                ("rows2", ctypes.c_int32), ("stride", ctypes.c_int32), ("pad", ctypes.c_int32),
                ("window", ctypes.c_int32), ("band", ctypes.c_int32)]


class Descriptor(ctypes.Structure):
    # run_profiled exists only when abi_minor >= 1 (read it only then).
    _fields_ = [("abi_version", ctypes.c_uint32), ("abi_minor", ctypes.c_uint32),
                ("prefix", ctypes.c_char_p), ("kiln_version", ctypes.c_char_p),
                ("target", ctypes.c_char_p),
                ("n_inputs", ctypes.c_int32), ("n_outputs", ctypes.c_int32),
                ("inputs", ctypes.POINTER(TensorDesc)), ("outputs", ctypes.POINTER(TensorDesc)),
                ("workspace_size", ctypes.c_int64), ("workspace_align", ctypes.c_int64),
                ("max_batch", ctypes.c_int64),
                ("n_steps", ctypes.c_int32), ("n_consts", ctypes.c_int32),
                ("steps", ctypes.POINTER(Step)), ("args", ctypes.c_void_p),
                ("consts", ctypes.c_void_p),
                ("run", RUN_FN), ("set_threads", SET_THREADS_FN), ("run_profiled", ctypes.c_void_p),
                ("n_pipes", ctypes.c_int32), ("pipes", ctypes.POINTER(Pipe)),
                # ABI 1.4 (GPU artifacts; CPU artifacts end before these: read only when abi_minor >= 4)
                ("last_error", ctypes.CFUNCTYPE(ctypes.c_char_p)), ("gpu", ctypes.c_void_p)]


class Tensor:
    """A tensor of the descriptor: name, numpy dtype, per-batch-unit dims, batch mask."""

    def __init__(self, d):
        self.name = d.name.decode()
        self.dtype = ONNX_TO_NP.get(d.dtype)
        if self.dtype is None:
            raise ValueError(f"tensor '{self.name}': unknown dtype code {d.dtype}")
        self.dims = [d.dims[i] for i in range(d.rank)]
        self.batch_mask = d.batch_mask

    def shape(self, batch):
        return tuple(x * batch if self.batch_mask >> i & 1 else x for i, x in enumerate(self.dims))

    def __repr__(self):
        dims = ", ".join(f"{x}*N" if self.batch_mask >> i & 1 else str(x)
                         for i, x in enumerate(self.dims))
        return f"{self.name}: {np.dtype(self.dtype).name}[{dims}]"


def check_elf(path):
    """Raises ValueError unless every segment and the section headers of the
    64-bit ELF file `path` lie inside it. dlopen maps the segments of a
    truncated copy anyway, and the first touch of a page past the end of the
    file kills the process with SIGBUS (rt/loader.c checks the same)."""
    def bad(why):
        return ValueError(f"'{path}' is truncated or not an ELF shared object: {why}")
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        eh = f.read(64)
        if len(eh) < 64 or eh[:4] != b"\x7fELF" or eh[4] != 2 or eh[5] != 1:
            raise bad(f"{len(eh)} bytes read, not a 64-bit little-endian ELF header")
        phoff, shoff = struct.unpack_from("<QQ", eh, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", eh, 54)
        if phentsize != 56 or phnum == 0 or phoff + phnum * 56 > size:
            raise bad(f"{phnum} program headers at byte {phoff} do not fit in {size} bytes")
        f.seek(phoff)
        table = f.read(phnum * 56)
        for i in range(phnum):
            offset, filesz = struct.unpack_from("<Q16xQ", table, i * 56 + 8)
            if offset + filesz > size:
                raise bad(f"segment {i} ends at byte {offset + filesz}, the file has {size}")
        if shoff and shoff + shnum * shentsize > size:
            raise bad(f"its section headers end at byte {shoff + shnum * shentsize}, the file has {size}")


class Artifact:
    """One loaded .so artifact (see the module docstring)."""

    def __init__(self, path):
        check_elf(path)
        # RTLD_LOCAL (ctypes' default): several artifacts coexist in one process.
        self.lib = ctypes.CDLL(os.path.abspath(path))
        self.desc = Descriptor.in_dll(self.lib, "kiln_artifact_v1")
        if self.desc.abi_version != ABI_VERSION:
            raise ValueError(f"{path}: artifact ABI version {self.desc.abi_version}, "
                             f"this wrapper speaks {ABI_VERSION}")
        d = self.desc
        self.prefix = d.prefix.decode()
        self.kiln_version = d.kiln_version.decode() if d.kiln_version else ""
        self.target = d.target.decode() if d.target else ""
        self.inputs = [Tensor(d.inputs[i]) for i in range(d.n_inputs)]
        self.outputs = [Tensor(d.outputs[i]) for i in range(d.n_outputs)]
        self.max_batch = d.max_batch
        self.steps = [(d.steps[i].name.decode(), d.steps[i].flops) for i in range(d.n_steps)]
        self.flops = sum(f for _, f in self.steps)  # per batch unit
        # row pipes (ABI 1.3): (first step name, second step name)
        self.pipes = [(self.steps[d.pipes[i].first][0], self.steps[d.pipes[i].first + 1][0])
                      for i in range(d.n_pipes if d.abi_minor >= 3 else 0)]
        align = max(1, d.workspace_align)
        raw = np.zeros(d.workspace_size + align, dtype=np.uint8)
        start = (-raw.ctypes.data) % align
        self._ws_raw = raw
        self.workspace = raw[start:start + d.workspace_size]
        self._ws_ptr = raw.ctypes.data + start
        self._out_batch = None
        self._threads = None

    def reason(self, status):
        """The artifact's one-line reason for a failed call (ABI 1.4), else the status name."""
        d = self.desc
        if d.abi_minor >= 4 and d.last_error:
            msg = d.last_error()
            if msg:
                return f"{msg.decode(errors='replace')} ({STATUS.get(status, status)})"
        return STATUS.get(status, status)

    def set_threads(self, n):
        if n != self._threads:
            status = self.desc.set_threads(n)
            if status != 0:
                raise ValueError(f"set_threads({n}) failed: {STATUS.get(status, status)}")
            self._threads = n

    def batch_of(self, arrays):
        """The batch implied by the input arrays (1 when no input is batched)."""
        for t, a in zip(self.inputs, arrays):
            for i, x in enumerate(t.dims):
                if t.batch_mask >> i & 1:
                    return a.shape[i] // x if x else 1
        return 1

    def prepare(self, *arrays, threads=None):
        """Checks inputs and binds buffers; returns a zero-argument callable
        that runs the model once (what a benchmark times) and the outputs it fills."""
        if len(arrays) != len(self.inputs):
            raise ValueError(f"{len(arrays)} inputs given, the artifact takes {len(self.inputs)}")
        if threads is not None:
            self.set_threads(threads)
        batch = self.batch_of(arrays)
        if not 1 <= batch <= self.max_batch:
            raise ValueError(f"batch {batch} outside [1, {self.max_batch}]")
        ins = []
        for t, a in zip(self.inputs, arrays):
            if a.shape != t.shape(batch) or a.dtype != t.dtype:
                raise ValueError(f"input '{t.name}': got {np.dtype(a.dtype).name}{list(a.shape)}, "
                                 f"expected {np.dtype(t.dtype).name}{list(t.shape(batch))}")
            ins.append(np.ascontiguousarray(a))
        outs = [np.empty(t.shape(batch), dtype=t.dtype) for t in self.outputs]
        in_ptrs = (ctypes.c_void_p * max(1, len(ins)))(*[a.ctypes.data for a in ins])
        out_ptrs = (ctypes.c_void_p * max(1, len(outs)))(*[a.ctypes.data for a in outs])
        run, ws = self.desc.run, self._ws_ptr

        def call():
            status = run(in_ptrs, out_ptrs, ws, batch)
            if status != 0:
                raise RuntimeError(f"{self.prefix}_run failed: {self.reason(status)}")

        call.keep = (ins, outs, in_ptrs, out_ptrs)  # keep the buffers alive with the closure
        return call, outs

    def run(self, *arrays, threads=None):
        """Runs once; returns the list of output arrays (fresh each call)."""
        call, outs = self.prepare(*arrays, threads=threads)
        call()
        return outs
