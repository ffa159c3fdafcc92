"""summary.py — gathers scripts/gpu-check.sh's results into summary.json and summary.md.

    python3 bench/gpu/summary.py WORK_DIR OUT_DIR

Reads the JSON lines the check wrote in WORK_DIR — steps.jsonl (every step:
status, seconds), checks.jsonl (compare.py), kiln.jsonl (kiln_time.py),
torch.jsonl (torch_peer.py), cublas.jsonl (cublas_gemm), env.json — and
writes OUT_DIR/summary.json (all rows, grouped) and OUT_DIR/summary.md
(tables: steps, correctness, model speed, GEMM). A missing file or value is a
"-" in the tables, so a partial run (a time limit, a failed build) still
sums up. Ratios are Kiln over the peer: below 1, Kiln is faster.
"""
import json
import os
import sys


def read_jsonl(path):
    rows = []
    if os.path.exists(path):
        with open(path, errors="replace") as f:  # a note cut inside a UTF-8 character
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass  # a line cut by a time limit
    return rows


def fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def ratio(a, b):
    return a / b if a is not None and b else None


def gemm_rows(kiln, cublas):
    """One row per GEMM size: Kiln's times and TFLOP/s beside cuBLAS's."""
    rows = []
    sizes = sorted({int(r["model"][6:]) for r in kiln if r.get("model", "").startswith("matmul")}
                   | {r["n"] for r in cublas if "n" in r})
    for n in sizes:
        flop = 2.0 * n ** 3
        k = next((r for r in kiln if r.get("model") == f"matmul{n}"), {})
        cb = {r.get("out"): r for r in cublas if r.get("n") == n and "tflops" in r}
        tf = lambda ms: flop / (ms * 1e-3) / 1e12 if ms else None  # noqa: E731
        row = {"n": n, "kiln_e2e_ms": k.get("e2e_ms"), "kiln_gemm_kernel_ms": k.get("top_kernel_ms"),
               "kiln_kernels_ms": k.get("kernels_ms"), "kiln_tflops_gemm_kernel": tf(k.get("top_kernel_ms")),
               "kiln_tflops_kernels": tf(k.get("kernels_ms")), "kiln_tflops_e2e": tf(k.get("e2e_ms")),
               "cublas_tflops_f16_out": cb.get("f16", {}).get("tflops"),
               "cublas_tflops_f32_out": cb.get("f32", {}).get("tflops"), "kiln_error": k.get("error")}
        row["kiln_over_cublas"] = ratio(row["kiln_tflops_gemm_kernel"], row["cublas_tflops_f16_out"])
        rows.append(row)
    return rows


def speed_rows(kiln, torch_rows):
    """One row per (model, batch, precision) timed: Kiln beside torch eager / compile."""
    keys = []
    for r in kiln + torch_rows:
        key = (r.get("model"), r.get("batch"), r.get("precision"))
        if key[0] and not key[0].startswith("matmul") and key not in keys:
            keys.append(key)
    rows = []
    for model, batch, prec in keys:
        match = lambda r: (r.get("model"), r.get("batch"), r.get("precision")) == (model, batch, prec)  # noqa: E731
        k = next((r for r in kiln if match(r)), {})
        eager = next((r for r in torch_rows if match(r) and r.get("mode") == "eager"), {})
        comp = next((r for r in torch_rows if match(r) and r.get("mode") == "compile"), {})
        rows.append({"model": model, "batch": batch, "precision": prec, "kiln_ms": k.get("e2e_ms"),
                     "kiln_kernels_ms": k.get("kernels_ms"), "kiln_method": k.get("method"),
                     "eager_ms": eager.get("median_ms"), "compile_ms": comp.get("median_ms"),
                     "compile_s": comp.get("compile_s"),
                     "kiln_over_eager": ratio(k.get("e2e_ms"), eager.get("median_ms")),
                     "kiln_over_compile": ratio(k.get("e2e_ms"), comp.get("median_ms")),
                     "notes": "; ".join(x for x in (k.get("error"), eager.get("error"),
                                                      comp.get("skipped") or comp.get("error")) if x)})
    return rows


def markdown(s):
    env = s["env"]
    out = [f"# Kiln GPU check — {env.get('device', '?')}", "",
           f"{env.get('date', '')}; target `{env.get('target', '?')}`; commit {env.get('commit', '?')}; "
           f"torch {env.get('torch', '-')}; {env.get('elapsed_s', '?')} s"
           + (" (DRY RUN: no GPU step ran)" if env.get("dry_run") else ""), "",
           f"**{s['failures']} failed step(s)**, {s['checks_passed']}/{len(s['checks'])} model checks passed.", "",
           "## Steps", "", "| step | status | s | note |", "|---|---|---:|---|"]
    for r in s["steps"]:
        out.append(f"| {r['step']} | {r['status']} | {fmt(r.get('seconds'), '.1f')} | {r.get('note', '')} |")
    out += ["", "## Correctness against ONNX Runtime (CPU, fp32), batch 1", "",
            "fp32: max abs err ≤ tol = 1e-3 × max(1, max|ref|); fp16/bf16: cosine ≥ 0.999.", "",
            "| model | precision | result | max abs err | tol | cosine | worst rel err | note |",
            "|---|---|---|---:|---:|---:|---:|---|"]
    for r in s["checks"]:
        result = "PASS" if r.get("pass") else "FAIL"
        out.append(f"| {r.get('model')} | {r.get('precision')} | {result} | {fmt(r.get('max_abs_err'), '.3g')} | "
                   f"{fmt(r.get('tol'), '.3g')} | {fmt(r.get('cosine'), '.6f')} | {fmt(r.get('max_rel_err'), '.3g')} | "
                   f"{r.get('error') or r.get('why') or ''} |")
    out += ["", "## Models: Kiln against PyTorch (median ms)", "",
            "kiln ms: whole calls through the artifact ABI from host memory (copies included); kernels: "
            "sum of the kernels' medians (kiln run --profile); torch: inputs already on the GPU.", "",
            "| model | batch | precision | kiln ms | kiln kernels ms | eager ms | compile ms | kiln/eager | "
            "kiln/compile | compile s | note |", "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in s["speed"]:
        out.append(f"| {r['model']} | {r['batch']} | {r['precision']} | {fmt(r['kiln_ms'])} | "
                   f"{fmt(r['kiln_kernels_ms'])} | {fmt(r['eager_ms'])} | {fmt(r['compile_ms'])} | "
                   f"{fmt(r['kiln_over_eager'], '.2f')} | {fmt(r['kiln_over_compile'], '.2f')} | "
                   f"{fmt(r['compile_s'], '.1f')} | {r['notes']} |")
    out += ["", "## fp16 GEMM N×N×N: Kiln against cuBLAS (TFLOP/s)", "",
            "Kiln: the matmulN model (fp32 in/out, --precision fp16); gemm kernel = the profile's largest "
            "kernel, kernels = all of them (casts included), e2e = whole calls with copies. cuBLAS: "
            "cublasGemmEx fp16 in, fp32 compute, fp16 or fp32 out. ratio = kiln gemm kernel / cuBLAS f16 out.", "",
            "| N | kiln gemm kernel | kiln kernels | kiln e2e | cuBLAS f16 out | cuBLAS f32 out | ratio | note |",
            "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in s["gemm"]:
        out.append(f"| {r['n']} | {fmt(r['kiln_tflops_gemm_kernel'], '.1f')} | {fmt(r['kiln_tflops_kernels'], '.1f')} | "
                   f"{fmt(r['kiln_tflops_e2e'], '.1f')} | {fmt(r['cublas_tflops_f16_out'], '.1f')} | "
                   f"{fmt(r['cublas_tflops_f32_out'], '.1f')} | {fmt(r['kiln_over_cublas'], '.2f')} | "
                   f"{r.get('kiln_error') or ''} |")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 2:
        print("usage: summary.py WORK_DIR OUT_DIR", file=sys.stderr)
        return 2
    work, out_dir = argv
    env = {}
    if os.path.exists(os.path.join(work, "env.json")):
        with open(os.path.join(work, "env.json")) as f:
            env = json.load(f)
    steps = read_jsonl(os.path.join(work, "steps.jsonl"))
    checks = read_jsonl(os.path.join(work, "checks.jsonl"))
    kiln = read_jsonl(os.path.join(work, "kiln.jsonl"))
    torch_rows = read_jsonl(os.path.join(work, "torch.jsonl"))
    cublas = read_jsonl(os.path.join(work, "cublas.jsonl"))
    order = {"fp32": 0, "fp16": 1, "bf16": 2}  # the checks ran in parallel: sort them
    checks.sort(key=lambda r: (str(r.get("model")), order.get(r.get("precision"), 3)))
    s = {"env": env, "failures": sum(r.get("status") in ("fail", "timeout") for r in steps),
         "checks_passed": sum(bool(r.get("pass")) for r in checks), "steps": steps, "checks": checks,
         "speed": speed_rows(kiln, torch_rows), "gemm": gemm_rows(kiln, cublas),
         "raw": {"kiln": kiln, "torch": torch_rows, "cublas": cublas}}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(s, f, indent=1)
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(markdown(s))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
