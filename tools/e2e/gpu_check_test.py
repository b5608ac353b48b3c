#!/usr/bin/env python3
"""tools/gpu-check's library search, the part of it that runs without a GPU: a build folder in
tools/gpu-bundle's layout has its lib/ searched before the system's, a folder without zero3 is
refused with exit 1, and a machine without a driver gets exit 4 after the libraries were found.

  gpu_check_test.py ZERO3_BINARY
"""
import os
import shutil
import subprocess
import sys
import tempfile

GPU_CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu-check")


def gpu_check(*args):
    result = subprocess.run([sys.executable, GPU_CHECK, *args], capture_output=True, text=True, timeout=120)
    return result.returncode, result.stdout + result.stderr


def main():
    zero3 = sys.argv[1]
    failures, checks = [], []

    def expect(condition, what, output):
        checks.append(what)
        if not condition:
            failures.append(f"{what}\n--- output ---\n{output[-2000:]}")

    with tempfile.TemporaryDirectory() as empty:
        code, output = gpu_check("--build", empty, "--check-libraries")
        expect(code == 1 and "does not exist" in output and "gpu-bundle" in output,
               f"a folder without tools/zero3: exit 1 naming tools/gpu-bundle, got {code}", output)

    ldd = subprocess.run(["ldd", zero3], capture_output=True, text=True).stdout
    carried = [line.split()[0] for line in ldd.splitlines() if "libboost_context" in line]
    if not carried:
        print("gpu_check_test: zero3 does not load libboost_context dynamically; the bundle-layout case needs one "
              "carried library", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as bundle:
        os.makedirs(os.path.join(bundle, "tools"))
        os.makedirs(os.path.join(bundle, "lib"))
        shutil.copy2(zero3, os.path.join(bundle, "tools", "zero3"))
        system_copy = [line.split()[2] for line in ldd.splitlines() if "libboost_context" in line][0]
        shutil.copy2(system_copy, os.path.join(bundle, "lib", carried[0]))
        code, output = gpu_check("--build", bundle, "--check-libraries")
        resolved = [line for line in output.splitlines() if carried[0] in line and "=>" in line]
        expect(code == 0 and resolved and os.path.join(bundle, "lib") in resolved[0],
               f"a bundle's lib/ comes first: {carried[0]} from {bundle}/lib, exit 0; got {code}", output)
        expect("not found" not in output, "every library found", output)

    # --deadline: every command is cut to the time left, so a hang cannot cost the figures measured.
    import importlib.machinery
    import importlib.util
    import time
    loader = importlib.machinery.SourceFileLoader("gpu_check", GPU_CHECK)
    gpu_check_module = importlib.util.module_from_spec(importlib.util.spec_from_loader("gpu_check", loader))
    loader.exec_module(gpu_check_module)
    code, output, _ = gpu_check_module.run(["true"], 30)
    expect(code == 0, f"without a deadline a command runs as asked: exit 0, got {code}", output)
    gpu_check_module.DEADLINE = time.monotonic() + 2
    started = time.monotonic()
    # The command leaves a grandchild behind (as compute-sanitizer leaves the GPU program): the cut
    # must end it too, or it would hold the GPU through the later stages.
    code, output, _ = gpu_check_module.run(["bash", "-c", "sleep 30 & echo grandchild $!; wait"], 300)
    expect(code == 124 and time.monotonic() - started < 10 and gpu_check_module.CUT_BY_DEADLINE,
           f"a command past the deadline is cut at it: exit 124 within 10 s, marked as cut by the deadline; got "
           f"{code} after {time.monotonic() - started:.1f} s", output)
    grandchild = [int(word) for line in output.splitlines() if line.startswith("grandchild")
                  for word in line.split()[1:]]
    def alive(pid):  # a killed process can linger as a zombie until its new parent reaps it
        try:
            return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False
    time.sleep(0.2)
    expect(grandchild and not alive(grandchild[0]),
           f"the cut command's whole process group is killed (grandchild {grandchild})", output)

    # A GPU test that skips fails its stage (gpu-check runs only where a driver is); a CPU test passes.
    build = os.path.dirname(os.path.dirname(zero3))
    cpu_test = os.path.join(build, "backend_cuda", "cuda", "gemm_shape_test")
    gpu_test = os.path.join(build, "backend_cuda", "cuda", "cuda_kernels_test")
    if os.path.exists(cpu_test) and os.path.exists(gpu_test) and not os.path.exists("/dev/nvidia0"):
        gpu_check_module.DEADLINE = float("inf")
        passed = gpu_check_module.gtest_stage(cpu_test, 60)
        expect(passed["status"] == "passed" and passed["figures"]["skipped"] == 0 and passed["figures"]["tests"],
               f"a CPU test's stage passes: {passed['status']} {passed['figures']}", passed["output_tail"])
        skipped = gpu_check_module.gtest_stage(gpu_test, 60, (), gpu_check_module.MEMCHECK_TESTS)
        expect(skipped["status"] == "failed" and skipped["figures"]["skipped"] == skipped["figures"]["tests"] == 7,
               f"the memcheck subset (7 tests), skipping without a GPU, fails its stage: {skipped['status']} "
               f"{skipped['figures']}", skipped["output_tail"])

    if shutil.which("nvidia-smi") is None:
        code, output = gpu_check("--build", os.path.dirname(os.path.dirname(zero3)), "--out",
                                 os.path.join(tempfile.gettempdir(), "gpu-check-test-unwritten.json"))
        expect(code == 4 and "no nvidia-smi" in output, f"no driver: exit 4, got {code}", output)

    for failure in failures:
        print("FAILED:", failure, file=sys.stderr)
    print(f"gpu_check_test: {len(checks) - len(failures)} of {len(checks)} checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
