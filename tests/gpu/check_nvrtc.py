"""check_nvrtc.py — every kernel of a model compiles through NVRTC for the
default architectures with no spill (ctest label `models`; no GPU needed).

    check_nvrtc.py KILN MODEL.onnx PRECISION

Runs `kiln compile MODEL --target cuda --precision PRECISION -v` (sm_80 and
sm_90, plus PTX) and reads the per-kernel lines -v prints: every kernel must
report both architectures, with 0 bytes of spill stores and loads. Prints
how many kernels there are and how many run on the Tensor Core template
(`tensorize` in --dump-after=te), and the most registers any kernel
takes. Exits 77 (a skip) where kiln finds no NVRTC."""
import os
import re
import subprocess
import sys
import tempfile

LINE = re.compile(r"^kiln: (\S+): block (\d+)x(\d+)x(\d+), dynamic shared (\d+) bytes(.*)$")
ARCH = re.compile(r"sm_(\d+): (\d+) registers, (\d+) bytes spill stores, (\d+) spill loads, (\d+) bytes shared")


def main():
    kiln, model, precision = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as tmp:
        art = os.path.join(tmp, "gpu.so")
        r = subprocess.run([kiln, "compile", model, "--target", "cuda", "--precision", precision, "-v",
                            "--dump-after=te", "-o", art], capture_output=True, text=True)
    if r.returncode != 0 and "NVRTC not found" in r.stderr:
        print(f"SKIP: {r.stderr.strip()}")
        return 77
    if r.returncode != 0:
        print(r.stderr[-4000:], end="")
        print(f"FAIL: kiln compile exited {r.returncode}")
        return 1
    kernels, failures, most = 0, [], (0, "")
    for line in r.stderr.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        kernels += 1
        archs = {int(a[0]): a for a in ARCH.findall(m.group(6))}
        if set(archs) != {80, 90}:
            failures.append(f"{m.group(1)}: architectures {sorted(archs)}")
        for sm, regs, st, ld, _ in archs.values():
            if int(st) or int(ld):
                failures.append(f"{m.group(1)}: sm_{sm} spills {st} bytes stored, {ld} loaded")
            most = max(most, (int(regs), f"{m.group(1)} on sm_{sm}"))
    tensorized = r.stdout.count("\ntensorize(")
    rows = r.stdout.count("\nrow_reduce(")
    print(f"{os.path.basename(model)} {precision}: {kernels} kernels ({tensorized} on Tensor Cores, {rows} row "
          f"reductions), at most {most[0]} registers ({most[1]})")
    if kernels == 0:
        failures.append("kiln -v printed no kernel")
    for f in failures:
        print(f"FAIL: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
