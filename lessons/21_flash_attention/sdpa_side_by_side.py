#!/usr/bin/env python3
"""Lesson 21 of the course (attention) beside the attention of a library, on the same GPU.

For each of eight shapes (batch x heads, N, d, causal or not) it runs the lesson's rung 9 (the
warp-specialized wgmma kernel) and, right after it, PyTorch's scaled_dot_product_attention on its
cuDNN and FlashAttention-2 backends with the same bf16 shapes, and writes one summary in the
format of docs/results/ (scripts/results.py lesson 21_flash_attention FILE prints it as a table).
Needs PyTorch with CUDA; the lesson does not.

    python3 lessons/21_flash_attention/sdpa_side_by_side.py --lesson=build/bin/flash_attention \
        --commit=$(git rev-parse --short HEAD) --json=side-by-side.json

TFLOP/s count 4 N^2 d per head, half of that when causal, as the lesson counts them. The library
times are medians of CUDA-event timings of single calls after a warm-up.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from torch_timing import median_ms  # noqa: E402

SHAPES = [(4, 16, 8192, 64), (4, 16, 8192, 128), (16, 16, 2048, 64), (16, 16, 2048, 128)]
RUNG = "9 fused, wgmma, warp-specialized"
LIBRARIES = [("cuDNN", "CUDNN_ATTENTION"), ("FlashAttention-2", "FLASH_ATTENTION")]


def shape_text(B, H, N, d, causal):
    return "%sB=%d H=%d N=%d d=%d" % ("causal " if causal else "", B, H, N, d)


def lesson_rate(exe, B, H, N, d, causal):
    """Rung 9's TFLOP/s at one shape, from the lesson's own JSON report (None, reason on failure)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "report.json")
        cmd = [exe, "--rung=9", "--batch=%d" % B, "--heads=%d" % H, "--n=%d" % N, "--d=%d" % d,
               "--json=" + path] + (["--causal"] if causal else [])
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            last = run.stdout.strip().splitlines()[-1:] or ["(no output)"]
            return None, "the lesson exited %d: %s" % (run.returncode, last[0])
        report = json.load(open(path))
    tag = "@N=%d, d=%d" % (N, d)
    for v in report.get("variants", []):
        if v["name"].startswith("9 ") and tag in v["name"]:
            return v, None
    return None, "no rung 9 variant at %s in the lesson's report" % tag


def library_ms(torch, backend, B, H, N, d, causal, reps):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    fn = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    with sdpa_kernel(getattr(SDPBackend, backend)):
        return median_ms(fn, reps, warmup=3)


def driver():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.split()
        return out[0] if out else ""
    except OSError:
        return ""


def variant(name, ms, rate, reference=None, reference_rate=None):
    v = {"name": name, "ms": ms, "rate": rate, "unit": "TFLOP/s", "against": "", "against_text": "",
         "fraction": None, "reference": "", "reference_rate": None, "ungraded": ""}
    if reference and reference_rate:
        v.update(against="yardstick", reference=reference, reference_rate=reference_rate,
                 fraction=rate / reference_rate, against_text="%.2fx %s" % (rate / reference_rate, reference))
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lesson", required=True, help="the lesson's executable (build/bin/flash_attention)")
    ap.add_argument("--json", required=True, help="where to write the summary")
    ap.add_argument("--commit", default="", help="the commit the lesson was built from")
    ap.add_argument("--reps", type=int, default=20, help="timed calls of each library kernel")
    a = ap.parse_args()
    if a.reps < 1:
        print("sdpa_side_by_side.py: --reps must be at least 1", file=sys.stderr)
        return 2
    if not os.access(a.lesson, os.X_OK):
        print("sdpa_side_by_side.py: %s is not an executable (build the lesson first)" % a.lesson, file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("sdpa_side_by_side.py: needs PyTorch with CUDA", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("sdpa_side_by_side.py: no CUDA GPU for PyTorch", file=sys.stderr)
        return 77
    variants, failures = [], []
    for causal in (False, True):
        for B, H, N, d in SHAPES:
            shape = shape_text(B, H, N, d, causal)
            # The lesson first, then each library at once after it: the same clocks and temperature.
            mine, why = lesson_rate(a.lesson, B, H, N, d, causal)
            if mine is None:  # nothing to compare the libraries with
                failures.append("%s: %s" % (shape, why))
                print("rung 9 %s: %s" % (shape, why))
                continue
            flops = 4.0 * B * H * N * N * d / (2 if causal else 1)
            libs = []
            for label, backend in LIBRARIES:
                try:
                    ms = library_ms(torch, backend, B, H, N, d, causal, a.reps)
                    libs.append(variant("%s (PyTorch SDPA) %s" % (label, shape), ms, flops / ms / 1e9))
                except Exception as e:  # a backend this build of PyTorch or this GPU lacks
                    print("%s %s: unavailable (%s)" % (label, shape, str(e).splitlines()[0][:80]))
            cudnn = next((v for v in libs if v["name"].startswith("cuDNN")), None)
            variants.append(variant("%s %s" % (RUNG, shape), mine["ms"], mine["rate"],
                                    "cuDNN" if cudnn else None, cudnn["rate"] if cudnn else None))
            variants += libs
            print("%s: rung 9 %.1f%s TFLOP/s" % (shape, mine["rate"], "".join(
                ", %s %.1f" % (v["name"].split(" (")[0], v["rate"]) for v in libs)), flush=True)
    props = torch.cuda.get_device_properties(0)
    summary = {
        "commit": a.commit, "cuda": torch.version.cuda, "date": datetime.date.today().isoformat(),
        "driver": driver(), "gpu": "GPU 0: %s (cc %d.%d, %d SMs)" % (props.name, props.major, props.minor,
                                                            props.multi_processor_count),
        "mode": "side-by-side", "total_seconds": 0, "torch": torch.__version__,
        "lessons": {"21_flash_attention": {
            "result": "PASS" if not failures else "FAIL", "variants": variants, "metrics": [], "checks": [],
            "bounds": [], "yardsticks": [], "targets": [], "warnings": [], "seconds": None,
            "device": {"name": props.name, "cc": "%d.%d" % (props.major, props.minor),
                       "sms": props.multi_processor_count, "memory_gb": props.total_memory / 1e9, "emulating": ""},
            "key_result": {}}},
    }
    with open(a.json, "w") as f:
        json.dump(summary, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
