"""model.py — a loaded .so artifact, called from Python.

Model(path) dlopens the artifact, reads its `kiln_artifact_v1` descriptor
(abi.py) and calls P_run with numpy buffers. Two ways in:
  * model(x=..., ...) or model(a, b) or model({"x": ...}): arrays in the
    caller's dtypes (dtypes.py), every input checked against the descriptor
    (name, dtype, shape, the batch N shared by all inputs, 1 <= N <= max_batch,
    sub-byte ranges) before anything runs; returns {output name: array}.
  * prepare(*buffers) / run(*buffers): the raw ABI buffers in input order
    (bfloat16 as uint16 bits...), for benchmarks: prepare binds once and
    returns a zero-argument call that runs the model (bench/).
The model owns one workspace (sized for max_batch, aligned as declared). Like
the C ABI, one artifact must not run on two threads at once, and its thread
pool (set_threads) is shared by every Model of the same file in a process.
"""
import ctypes
import os

import numpy as np

from . import abi, dtypes
from .errors import InputError, RunError


class Tensor:
    """An input or output of the artifact.

    name; type (the element type's name: "float32", "bfloat16", "int4"...);
    dtype (numpy dtype of the caller's arrays); storage (numpy dtype of the
    artifact's buffer); dims (per batch unit) and batch_mask (bit i: dim i is
    dims[i] * N); shape(batch) the array shape at a batch."""

    def __init__(self, d, path):
        self.name = d.name.decode(errors="replace")
        self.code = d.dtype
        if d.dtype not in dtypes.TYPES:
            raise InputError(f"'{path}': tensor '{self.name}' has unknown dtype code {d.dtype}")
        self.type, storage, dtype = dtypes.TYPES[d.dtype]
        self.storage, self.dtype = np.dtype(storage), np.dtype(dtype)
        self.dims = tuple(d.dims[i] for i in range(d.rank))
        self.batch_mask = d.batch_mask

    def batched(self, i):
        return bool(self.batch_mask >> i & 1)

    def shape(self, batch):
        return tuple(x * batch if self.batched(i) else x for i, x in enumerate(self.dims))

    def shape_str(self):
        """As kiln prints it: [N, 3, 32, 32], 4*N for a dim of 4 per batch unit."""
        return "[" + ", ".join(("N" if x == 1 else f"{x}*N") if self.batched(i) else str(x)
                               for i, x in enumerate(self.dims)) + "]"

    def __repr__(self):
        return f"{self.name}: {self.type}{self.shape_str()}"


class Model:
    """One loaded .so artifact (see the module docstring); kiln.load makes one."""

    def __init__(self, path, threads=None):
        path = os.fspath(path)
        self.path = path
        abi.check_elf(path, InputError)
        try:  # RTLD_LOCAL (ctypes' default): several artifacts coexist in one process
            self.lib = ctypes.CDLL(os.path.abspath(path))
        except OSError as e:
            raise InputError(f"cannot load artifact '{path}': {e}") from None
        try:
            self.desc = abi.Descriptor.in_dll(self.lib, "kiln_artifact_v1")
        except ValueError:
            raise InputError(f"'{path}' is not a Kiln artifact (no kiln_artifact_v1 symbol)") from None
        d = self.desc
        if d.abi_version != abi.ABI_VERSION:
            raise InputError(f"'{path}' has artifact ABI version {d.abi_version}; "
                             f"this package reads version {abi.ABI_VERSION}")
        self.abi = f"{d.abi_version}.{d.abi_minor}"
        self.prefix = d.prefix.decode()
        self.kiln_version = d.kiln_version.decode() if d.kiln_version else ""
        self.target = d.target.decode() if d.target else ""
        self.inputs = [Tensor(d.inputs[i], path) for i in range(d.n_inputs)]
        self.outputs = [Tensor(d.outputs[i], path) for i in range(d.n_outputs)]
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
        self.threads = None
        if threads is not None:
            self.set_threads(threads)

    def __repr__(self):
        return (f"<kiln.Model '{self.path}': {', '.join(map(repr, self.inputs))} -> "
                f"{', '.join(map(repr, self.outputs))}, max_batch {self.max_batch}>")

    @property
    def input_names(self):
        return [t.name for t in self.inputs]

    @property
    def output_names(self):
        return [t.name for t in self.outputs]

    def reason(self, status):
        """The artifact's one-line reason for a failed call (ABI 1.4), and the status name."""
        d, name = self.desc, abi.STATUS.get(status, f"status {status}")
        if d.abi_minor >= 4 and d.last_error:
            msg = d.last_error()
            if msg:
                return f"{msg.decode(errors='replace')} ({name})"
        return name

    def set_threads(self, n):
        """Sizes the artifact's thread pool, 1 <= n <= 256 (P_set_threads)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= 256:
            raise InputError(f"threads: want a whole number in [1, 256], got {n!r}")
        if n != self.threads:
            status = self.desc.set_threads(int(n))
            if status != 0:
                raise RunError(f"{self.prefix}_set_threads({n}) failed: {self.reason(status)}")
            self.threads = int(n)

    # ---- calling with the caller's arrays ----

    def __call__(self, *args, **kwargs):
        """Runs once on the inputs, given by name, in order, or as one dict;
        returns {output name: array} (fresh arrays each call)."""
        given = self._match(args, kwargs)
        buffers, batch = [], None
        for t, value in zip(self.inputs, given):
            a = self._as_array(t, value)
            batch = self._check_shape(t, a, batch)
            bad = dtypes.out_of_range(t.type, a)
            if bad:
                lo, hi = dtypes.SUBBYTE[t.type]
                raise InputError(f"input '{t.name}': {bad[1]} at index {bad[0]} is outside the range "
                                 f"of {t.type} ({lo}..{hi})")
            buffers.append(dtypes.encode(t.type, a))
        outs = self._run(buffers, batch or 1)
        return {t.name: dtypes.decode(t.type, o) for t, o in zip(self.outputs, outs)}

    def _match(self, args, kwargs):
        """The value of each input, in the descriptor's order."""
        if len(args) == 1 and not kwargs and isinstance(args[0], dict):
            kwargs, args = args[0], ()
        names = self.input_names
        if len(args) > len(names):
            raise InputError(f"{len(args)} inputs given, the model takes {len(names)} ({', '.join(names)})")
        values = dict(zip(names, args))
        for name, v in kwargs.items():
            if name not in names:
                raise InputError(f"unknown input '{name}' (the model's inputs: {', '.join(names)})")
            if name in values:
                raise InputError(f"input '{name}' is given twice")
            values[name] = v
        missing = [n for n in names if n not in values]
        if missing:
            raise InputError(f"missing input{'s' if len(missing) > 1 else ''} "
                             f"{', '.join(repr(n) for n in missing)} (the model's inputs: {', '.join(names)})")
        return [values[n] for n in names]

    @staticmethod
    def _as_array(t, value):
        """An ndarray must have the input's dtype; anything else (a list, a
        scalar) is converted to it."""
        hint = f" ({t.type} in the artifact, given as {t.dtype.name})" if t.type != t.dtype.name else ""
        if isinstance(value, np.ndarray):
            if value.dtype != t.dtype:
                got = value.dtype.name if value.dtype.isnative else f"{value.dtype.str} (byte-swapped)"
                raise InputError(f"input '{t.name}': dtype {got}, the model expects "
                                 f"{t.dtype.name}{hint}")
            return value if value.flags.c_contiguous else value.copy(order="C")
        try:
            return np.array(value, dtype=t.dtype, order="C")
        except (TypeError, ValueError, OverflowError) as e:
            raise InputError(f"input '{t.name}': cannot make a {t.dtype.name} array of it{hint}: {e}") from None

    def _check_shape(self, t, a, batch):
        """The batch N the array gives (with the one of the inputs before)."""
        shape = list(a.shape)
        expect = f"the model expects {t.shape_str()}"
        if any(t.batched(i) for i in range(len(t.dims))):
            expect += f" with N in 1..{self.max_batch}"
        ok = len(shape) == len(t.dims)
        n = None
        for i, x in enumerate(t.dims if ok else ()):
            if not t.batched(i):
                ok = ok and shape[i] == x
            elif x <= 0 or shape[i] % x or shape[i] == 0 or (n is not None and shape[i] // x != n):
                ok = False
            else:
                n = shape[i] // x
        if not ok:
            raise InputError(f"input '{t.name}': shape {shape}, {expect}")
        if n is None:
            return batch
        if n > self.max_batch:
            raise InputError(f"input '{t.name}': shape {shape} is batch {n}, above the artifact's "
                             f"max_batch {self.max_batch} ({expect})")
        if batch is not None and n != batch:
            raise InputError(f"input '{t.name}': shape {shape} is batch {n}, the inputs before it batch "
                             f"{batch} (all inputs share N)")
        return n

    def _run(self, buffers, batch):
        call, outs = self._bind(buffers, batch)
        call()
        return outs

    # ---- the raw ABI buffers (bench/) ----

    def batch_of(self, arrays):
        """The batch implied by the input buffers (1 when no input is batched)."""
        for t, a in zip(self.inputs, arrays):
            for i, x in enumerate(t.dims):
                if t.batched(i):
                    return a.shape[i] // x if x else 1
        return 1

    def prepare(self, *arrays, threads=None):
        """Checks raw ABI buffers (in input order, the artifact's own dtypes)
        and binds them; returns a zero-argument callable that runs the model
        once (what a benchmark times) and the output buffers it fills."""
        if len(arrays) != len(self.inputs):
            raise InputError(f"{len(arrays)} inputs given, the artifact takes {len(self.inputs)}")
        if threads is not None:
            self.set_threads(threads)
        batch = self.batch_of(arrays)
        if not 1 <= batch <= self.max_batch:
            raise InputError(f"batch {batch} outside [1, {self.max_batch}]")
        for t, a in zip(self.inputs, arrays):
            if a.shape != t.shape(batch) or a.dtype != t.storage:
                raise InputError(f"input '{t.name}': got {np.dtype(a.dtype).name}{list(a.shape)}, "
                                 f"expected {t.storage.name}{list(t.shape(batch))}")
        return self._bind([np.ascontiguousarray(a) for a in arrays], batch)

    def run(self, *arrays, threads=None):
        """Runs once on raw ABI buffers; returns the list of output buffers."""
        call, outs = self.prepare(*arrays, threads=threads)
        call()
        return outs

    def _bind(self, ins, batch):
        """A zero-argument call of P_run on checked buffers, and its outputs."""
        outs = [np.empty(t.shape(batch), dtype=t.storage) for t in self.outputs]
        in_ptrs = (ctypes.c_void_p * max(1, len(ins)))(*[a.ctypes.data for a in ins])
        out_ptrs = (ctypes.c_void_p * max(1, len(outs)))(*[a.ctypes.data for a in outs])
        run, ws = self.desc.run, self._ws_ptr

        def call():
            status = run(in_ptrs, out_ptrs, ws, batch)
            if status != 0:
                raise RunError(f"{self.prefix}_run failed: {self.reason(status)}")

        call.keep = (ins, outs, in_ptrs, out_ptrs)  # keep the buffers alive with the closure
        return call, outs


def load(path, threads=None):
    """Loads a .so artifact: a callable Model (see Model). threads: the size
    of its thread pool (default $KILN_NUM_THREADS, else the CPUs, at most 64)."""
    return Model(path, threads=threads)
