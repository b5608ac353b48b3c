#!/usr/bin/env python3
"""The layering check: core/ is a stack of layer folders, each including only the ones before it,
and backend_cuda/ holds three libraries that stay apart.

  base → tensor → sharding → autograd → nn → models → training → zero3   (README.md, "Layout")

A file in core/<layer>/ may include core/<earlier or same layer>/ headers, the standard library and
the third-party libraries the core links (nlohmann/json, BLAS). It may not include sim/,
backend_cuda/, props/, traces/ or tools/, nor a CUDA, NCCL, MPI or Boost.Context header: the core
depends only on its seams. Every violation is printed as FILE:LINE with what was included and why
it is not allowed; the exit code is 1 when there is any.

backend_cuda/ is launch/ (who started the process, how ranks meet: built everywhere, so no CUDA,
NCCL or MPI header), cuda/ (the CUDA + NCCL backend) and mpi/ (the MPI backend). cuda/ and mpi/
may include launch/; neither includes the other (a build has either without the other), and
launch/ includes neither. Every file there sits in one of the three folders.

  tools/check_layers.py [ROOT]      # ROOT holds core/; default: the repository this script is in
"""
import pathlib
import re
import sys

LAYERS = ["base", "tensor", "sharding", "autograd", "nn", "models", "training", "zero3"]
OUTSIDE_CORE = ["sim/", "backend_cuda/", "props/", "traces/", "tools/"]
# System headers of the real-hardware and simulator side (the seams' implementations use them).
FORBIDDEN_SYSTEM = re.compile(r"^(cuda|cublas|curand|nccl|mpi|boost/context|cub/|thrust/)")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')

# backend_cuda/'s folders: which sibling folders each may include, and which system headers it may not.
BACKEND_FOLDERS = {
    "launch": ([], re.compile(r"^(cuda|cublas|curand|nccl|mpi|cub/|thrust/)")),
    "cuda": (["launch"], re.compile(r"^mpi")),
    "mpi": (["launch"], re.compile(r"^(cuda|cublas|curand|nccl|cub/|thrust/)")),
}


def includes(path: pathlib.Path):
    """Each #include of the file as (line number, '<' or '"', header)."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = INCLUDE.match(line)
        if match:
            yield (number, *match.groups())


def layer_of(path: pathlib.Path, core: pathlib.Path):
    parts = path.relative_to(core).parts
    return parts[0] if len(parts) > 1 else None


def check_file(path: pathlib.Path, core: pathlib.Path, root: pathlib.Path):
    relative = path.relative_to(root)
    layer = layer_of(path, core)
    if layer not in LAYERS:
        where = "directly in core/" if layer is None else f"in core/{layer}/, which is not a layer"
        yield f"{relative}:1: {where}; files belong in one of core/{{{','.join(LAYERS)}}}/"
        return
    allowed = LAYERS[: LAYERS.index(layer) + 1]
    for number, quote, header in includes(path):
        if quote == "<":
            if FORBIDDEN_SYSTEM.match(header):
                yield (f"{relative}:{number}: includes <{header}>: the core never includes CUDA, NCCL, MPI "
                       f"or fiber headers (those live behind the seams, in sim/ and backend_cuda/)")
            continue
        if any(header.startswith(prefix) for prefix in OUTSIDE_CORE):
            yield (f"{relative}:{number}: includes \"{header}\": core/ may not include "
                   f"{', '.join(OUTSIDE_CORE)} (they build on the core, not the other way round)")
            continue
        target = re.match(r"core/([^/]+)/", header)
        if not target:
            yield f"{relative}:{number}: includes \"{header}\": expected a path core/<layer>/<file>"
            continue
        target_layer = target.group(1)
        if target_layer not in LAYERS:
            yield f"{relative}:{number}: includes \"{header}\": core/{target_layer}/ is not a layer"
        elif target_layer not in allowed:
            yield (f"{relative}:{number}: includes \"{header}\": core/{layer}/ may include only "
                   f"{', '.join(allowed)} ({target_layer} comes later in {' → '.join(LAYERS)})")


def check_backend_file(path: pathlib.Path, backend: pathlib.Path, root: pathlib.Path):
    relative = path.relative_to(root)
    parts = path.relative_to(backend).parts
    folder = parts[0] if len(parts) > 1 else None
    if folder not in BACKEND_FOLDERS:
        where = "directly in backend_cuda/" if folder is None else f"in backend_cuda/{folder}/, which is not a library folder"
        yield f"{relative}:1: {where}; files belong in one of backend_cuda/{{{','.join(BACKEND_FOLDERS)}}}/"
        return
    siblings, forbidden_system = BACKEND_FOLDERS[folder]
    allowed = [folder] + siblings
    for number, quote, header in includes(path):
        if quote == "<":
            if forbidden_system.match(header):
                yield (f"{relative}:{number}: includes <{header}>: backend_cuda/{folder}/ is built without that "
                       f"library's headers")
            continue
        target = re.match(r"backend_cuda/([^/]+)/", header)
        if target and target.group(1) not in allowed:
            may = " and ".join(f"backend_cuda/{name}/" for name in allowed)
            yield (f"{relative}:{number}: includes \"{header}\": backend_cuda/{folder}/ may include only {may} "
                   f"of the backends (cuda/ and mpi/ build on launch/, never on each other)")


def source_files(folder: pathlib.Path):
    return sorted(p for p in folder.rglob("*") if p.suffix in (".h", ".cc", ".cu", ".cuh"))


def main(argv):
    root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    core = root / "core"
    if not core.is_dir():
        print(f"check_layers: {core}: no such folder", file=sys.stderr)
        return 1
    files = source_files(core)
    violations = [v for path in files for v in check_file(path, core, root)]
    backend = root / "backend_cuda"
    backend_files = source_files(backend) if backend.is_dir() else []
    violations += [v for path in backend_files for v in check_backend_file(path, backend, root)]
    for violation in violations:
        print(violation)
    print(f"check_layers: {len(files)} files under {core}, {len(backend_files)} under {backend}, "
          f"{len(violations)} violation(s)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
