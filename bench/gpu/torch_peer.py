"""torch_peer.py — PyTorch eager and torch.compile timings of Kiln's models.

    python3 bench/gpu/torch_peer.py --cases resnet50:1:fp16,bert:64:fp16 [--mode eager|compile|both]
                                    [--device cuda] [--repeats 30] [--warmup 5]

Each case is MODEL:BATCH:DTYPE (dtype fp32, fp16 or bf16). The model is built
by models/export.py's own constructors (imported, not copied): same seed,
same BatchNorm calibration as the exported ONNX, then eval mode, moved to the
device and cast to the dtype (token-id inputs stay int64). Timing: `warmup`
untimed calls, then `repeats` calls each timed alone with the clock around a
device synchronize; the median is reported. torch.compile (default mode) is
timed the same way after its first call, whose wall time (compilation) is
reported as compile_s; when torch has no torch.compile or it fails, the line
says so and the run goes on.

Output: one JSON line per (case, mode), flushed as soon as it is measured, so
that a caller's time limit that kills a slow compilation keeps what came
before. Exit status 0 unless an eager measurement failed.
"""
import argparse
import json
import os
import sys
import time

import torch

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "models"))
import export  # noqa: E402  (models/export.py: the model set's definitions)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def parse_cases(text):
    """'resnet50:1:fp16,bert:64:fp16' -> [(model, batch, dtype name)]."""
    cases = []
    for item in filter(None, text.split(",")):
        parts = item.split(":")
        if len(parts) != 3 or parts[0] not in export.MODELS or parts[2] not in DTYPES \
                or not parts[1].isdigit() or int(parts[1]) < 1:
            raise SystemExit(f"torch_peer: error: bad case '{item}' (MODEL:BATCH:DTYPE, models "
                             f"{', '.join(export.MODELS)}, dtypes {', '.join(DTYPES)})")
        cases.append((parts[0], int(parts[1]), parts[2]))
    return cases


def build(name, batch, dtype, device):
    """The model as export.py builds it (seed, calibration), and one input."""
    make, shape, in_dtype, _, _ = export.MODELS[name]
    torch.manual_seed(export.SEED)
    model = make().eval()
    export.calibrate_batchnorm(model, shape)
    shape = (batch,) + tuple(shape[1:])
    if in_dtype == torch.int64:
        x = torch.randint(0, model.tok.num_embeddings, shape, dtype=torch.int64)
    else:
        x = torch.randn(shape).to(DTYPES[dtype])
    return model.to(device=device, dtype=DTYPES[dtype]), x.to(device)


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_calls(fn, x, device, warmup, repeats):
    """Median and min wall time in ms of `repeats` synchronized calls."""
    for _ in range(warmup):
        fn(x)
    sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(x)
        sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2], times[0]


def emit(row):
    print(json.dumps(row), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", required=True, help="MODEL:BATCH:DTYPE,... (e.g. resnet50:64:fp16)")
    ap.add_argument("--mode", choices=["eager", "compile", "both"], default="both")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args(argv)
    cases = parse_cases(args.cases)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("torch_peer: error: --device cuda but torch sees no GPU")
    # cuDNN picks its fastest convolution per shape, as a tuned deployment would.
    torch.backends.cudnn.benchmark = True
    common = {"peer": "torch", "torch": torch.__version__, "device": args.device,
              "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
              "repeats": args.repeats, "warmup": args.warmup}
    status = 0
    for name, batch, dtype in cases:
        case = dict(common, model=name, batch=batch, precision=dtype)
        try:
            model, x = build(name, batch, dtype, args.device)
        except Exception as e:  # a dtype the device lacks, out of memory...
            emit(dict(case, mode="eager", error=f"{type(e).__name__}: {e}"))
            status = 1
            continue
        with torch.inference_mode():
            eager_ok = True
            if args.mode in ("eager", "both"):
                try:
                    med, best = time_calls(model, x, args.device, args.warmup, args.repeats)
                    emit(dict(case, mode="eager", median_ms=med, min_ms=best))
                except Exception as e:
                    emit(dict(case, mode="eager", error=f"{type(e).__name__}: {e}"))
                    status, eager_ok = 1, False
            if args.mode in ("compile", "both") and not eager_ok:
                emit(dict(case, mode="compile", skipped="eager failed"))
            elif args.mode in ("compile", "both"):
                if not hasattr(torch, "compile"):
                    emit(dict(case, mode="compile", skipped=f"torch {torch.__version__} has no torch.compile"))
                    continue
                try:
                    compiled = torch.compile(model)
                    t0 = time.perf_counter()
                    compiled(x)
                    sync(args.device)
                    compile_s = time.perf_counter() - t0
                    med, best = time_calls(compiled, x, args.device, args.warmup, args.repeats)
                    emit(dict(case, mode="compile", median_ms=med, min_ms=best, compile_s=compile_s))
                except Exception as e:  # inductor missing a compiler, an unsupported op...
                    emit(dict(case, mode="compile", skipped=f"{type(e).__name__}: {str(e)[:300]}"))
        del model, x
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    return status


if __name__ == "__main__":
    sys.exit(main())
