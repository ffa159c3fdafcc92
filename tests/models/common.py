"""common.py — helpers shared by Kiln's model tests and the benchmark.

Python is only an oracle here: onnx reads the model's signature, onnxruntime
computes the reference, numpy makes inputs and compares. Kiln itself is always
driven through its CLI (`kiln compile`, `kiln run`) or, in bench/, through the
artifact's C ABI.

Conventions:
  * random inputs come from numpy's default_rng(seed); float inputs are
    standard normal, integer inputs are token ids in [0, vocab) where vocab is
    the row count of the embedding table (a Gather initializer) the input
    indexes, bool inputs are fair coin flips;
  * the symbolic batch dimension (any dim_param) takes the requested batch;
  * the pass criterion is max|kiln - ort| <= 1e-4 * max(1, max|ort|).
"""
import os
import shutil
import subprocess
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RTOL = 1e-4

# ONNX TensorProto.DataType -> numpy dtype (what Kiln's .npy reader may see).
ONNX_TO_NP = {
    1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
    7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64,
}


def default_kiln():
    """The kiln binary: $KILN, else build/kiln in the repo."""
    return os.environ.get("KILN") or os.path.join(REPO, "build", "kiln")


class InputSpec:
    """One graph input: name, numpy dtype, dims (str for a symbolic dim), vocab."""

    def __init__(self, name, dtype, dims, vocab=None):
        self.name, self.dtype, self.dims, self.vocab = name, dtype, dims, vocab

    def shape(self, batch):
        return tuple(batch if isinstance(d, str) else d for d in self.dims)

    def has_batch(self):
        return any(isinstance(d, str) for d in self.dims)


def model_inputs(model_path):
    """Returns the InputSpec of each true graph input (initializers excluded).
    Loads without external data: only the signature and shapes are needed."""
    model = onnx.load(model_path, load_external_data=False)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    specs = []
    for vi in graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dims = [d.dim_param if d.dim_param else (d.dim_value if d.HasField("dim_value") else "?")
                for d in tt.shape.dim]
        dtype = ONNX_TO_NP.get(tt.elem_type)
        if dtype is None:
            raise SystemExit(f"{model_path}: input '{vi.name}' has ONNX dtype {tt.elem_type}, "
                             "which the test driver cannot generate")
        vocab = None
        if np.issubdtype(dtype, np.integer):
            for node in graph.node:  # an embedding lookup: Gather(table, ids)
                if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == vi.name \
                        and node.input[0] in inits:
                    vocab = inits[node.input[0]].dims[0]
                    break
        specs.append(InputSpec(vi.name, dtype, dims, vocab))
    return specs


def make_inputs(specs, batch=1, seed=0):
    """Deterministic random inputs for `specs` at `batch`: {name: ndarray}."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for s in specs:
        shape = s.shape(batch)
        if np.issubdtype(s.dtype, np.floating):
            a = rng.standard_normal(shape).astype(s.dtype)
        elif s.dtype == np.bool_:
            a = rng.integers(0, 2, shape).astype(np.bool_)
        else:
            a = rng.integers(0, s.vocab or 2, shape).astype(s.dtype)
        # np.ascontiguousarray would turn a 0-d input into shape (1,)
        feeds[s.name] = np.array(a, dtype=s.dtype, order="C", copy=True).reshape(shape)
    return feeds


def save_inputs(tmp, tag, feeds):
    """Writes each feed to TMP/TAG_NAME.npy; returns the `kiln run --input` flags."""
    args = []
    for k, v in feeds.items():
        f = os.path.join(tmp, f"{tag}_{k}.npy")
        np.save(f, v)
        args += ["--input", f"{k}={f}"]
    return args


def fixed_batch(src, dst):
    """src saved as dst with every symbolic dim of its inputs and outputs
    fixed to 1: the model as exported with a static batch of 1."""
    m = onnx.load(src)
    for vi in list(m.graph.input) + list(m.graph.output):
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param:
                d.ClearField("dim_param")
                d.dim_value = 1
    onnx.save(m, dst)


def ort_session(model_path, threads=1, optimize=False):
    """An ONNX Runtime CPU session. The reference for tests uses optimize=False
    (ORT_DISABLE_ALL: ORT evaluates the graph as written); the benchmark uses
    optimize=True (ORT_ENABLE_ALL)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    return ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])


def ort_reference(model_path, feeds):
    """{output name: ndarray} computed by ONNX Runtime (optimizations off)."""
    sess = ort_session(model_path)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def compare(got, want):
    """Returns (ok, err, tol, why): the pass criterion for one output."""
    want = np.asarray(want)
    if got.shape != want.shape:
        return False, float("inf"), 0.0, f"shape {list(got.shape)}, expected {list(want.shape)}"
    if got.dtype != want.dtype:
        return False, float("inf"), 0.0, f"dtype {got.dtype}, expected {want.dtype}"
    w = want.astype(np.float64)
    g = got.astype(np.float64)
    scale = float(np.max(np.abs(w))) if w.size else 0.0
    tol = RTOL * max(1.0, scale)
    if not np.all(np.isfinite(g) == np.isfinite(w)):
        return False, float("inf"), tol, "non-finite values where ONNX Runtime has finite ones"
    fin = np.isfinite(w)
    err = float(np.max(np.abs(g[fin] - w[fin]))) if fin.any() else 0.0
    return err <= tol, err, tol, ""


def run(cmd, **kw):
    """subprocess.run with captured text output."""
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def describe_failure(proc):
    """Exit status (or signal) and the tail of stderr/stdout, for a failed command."""
    how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
    tail = (proc.stderr.strip() or proc.stdout.strip())[-3000:]
    return f"{how}\n{tail}"


class TempDir:
    """A temporary folder, removed on exit unless `keep` names a folder to use."""

    def __init__(self, keep=None, prefix="kiln-test-"):
        self.keep = keep
        self.prefix = prefix

    def __enter__(self):
        if self.keep:
            os.makedirs(self.keep, exist_ok=True)
            self.path = os.path.abspath(self.keep)
        else:
            self.path = tempfile.mkdtemp(prefix=self.prefix)
        return self.path

    def __exit__(self, *exc):
        if not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)


def sanitizer_report(text):
    """True if a sanitizer complained in `text` (stderr of a kiln process)."""
    return "Sanitizer" in text or "runtime error:" in text
