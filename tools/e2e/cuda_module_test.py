#!/usr/bin/env python3
"""The CUDA backend as a module loaded on demand (backend_cuda/cuda/cuda_backend_module.h):
  - zero3 itself needs none of the CUDA libraries, the module needs them;
  - a command that needs no GPU never loads them;
  - `--backend cuda` loads the module and reaches CUDA: exit 4 with CUDA's own reason where there
    is no GPU (only the module can give that reason), exit 0 where there is one;
  - a zero3 copied away from its module says which file is missing (exit 4).

    tools/e2e/cuda_module_test.py build/tools/zero3
"""
import os
import shutil
import subprocess
import sys
import tempfile

CUDA_LIBRARIES = ("libcudart", "libcublas", "libcublasLt", "libnccl")
MODULE = "libzero3_cuda_backend.so"


def needed(path):
    """The DT_NEEDED names of an ELF file."""
    dynamic = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in dynamic.splitlines() if "(NEEDED)" in line]


def run(command, env=None):
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    return result.returncode, result.stdout + result.stderr


def main():
    zero3 = os.path.abspath(sys.argv[1])
    module = os.path.join(os.path.dirname(zero3), MODULE)
    failures = []

    def check(condition, what):
        print(("ok   " if condition else "FAIL ") + what)
        if not condition:
            failures.append(what)

    zero3_needs = needed(zero3)
    check(not any(name.startswith(CUDA_LIBRARIES) for name in zero3_needs),
          f"zero3 needs no CUDA library (needs {', '.join(zero3_needs)})")
    check(os.path.exists(module), f"the module is built beside zero3 ({module})")
    if failures:
        sys.exit(1)
    module_needs = needed(module)
    check(any(name.startswith("libcudart") for name in module_needs) and
          any(name.startswith("libnccl") for name in module_needs),
          f"the module needs the CUDA runtime and NCCL (needs {', '.join(module_needs)})")

    # The loader's own account of what it maps: no CUDA library for a command without a GPU.
    code, output = run([zero3, "replay", "--help"], env=dict(os.environ, LD_DEBUG="libs"))
    loaded = [name for name in CUDA_LIBRARIES if f"{name}.so" in output]
    check(code == 0 and not loaded, f"zero3 replay --help loads no CUDA library (exit {code}, loaded {loaded})")

    code, output = run([zero3, "bench", "comm", "--backend", "cuda", "--describe"])
    if os.path.exists("/dev/nvidia0"):
        check(code == 0 and "CUDA runtime" in output, f"with a GPU, the module describes it (exit {code}):\n{output}")
    else:
        check(code == 4 and "cudaGetDeviceCount failed" in output,
              f"without a GPU, the module is loaded and CUDA's reason comes back, exit 4 (exit {code}):\n{output}")

    with tempfile.TemporaryDirectory() as folder:
        copied = os.path.join(folder, "zero3")
        try:
            os.link(zero3, copied)  # the path a hard link is run by is the one /proc/self/exe names
        except OSError:
            shutil.copy2(zero3, copied)
        code, output = run([copied, "train", "--backend", "cuda", "--steps", "1"])
        check(code == 4 and os.path.join(folder, MODULE) in output and "is missing" in output,
              f"a zero3 without its module names the missing file, exit 4 (exit {code}):\n{output}")

    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
