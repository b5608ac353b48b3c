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

tools/'s C++ sits in three rooms: cli/ (the zero3 command line: main and a file per command), runs/
(a training run per backend and what a run needs: options, progress, reports) and bench/ (the
benchmark harness and a file per backend, as nccl-tests lays them out). cli/ builds on runs/ and
bench/, bench/ on runs/, runs/ on neither. sim/, props/ and traces/ never include tools/: the
tools build on them.

props/ holds zero3's own properties at its top and three rooms: target/ (the differential harness
against other frameworks), lifecycle/ (the lifecycle checkers) and injections/ (the bug injections
and their tables). Nothing of props/ outside target/ includes target/: zero3's properties never
depend on another framework's harness.

traces/ holds the trace format (format/: the trace, its reader, writer, recorder and scaling) and
replay (replay/: the simulations, reports, timelines, fit advice); format/ never includes replay/.

  tools/lint/check_layers.py [ROOT]      # ROOT holds core/; default: the repository this script is in
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


# tools/'s C++ rooms: which other rooms each may include.
TOOLS_ROOMS = {"cli": ["runs", "bench"], "bench": ["runs"], "runs": []}
# Folders that the tools build on, so never include tools/.
BELOW_TOOLS = ["sim", "props", "traces"]


def check_tools_file(path: pathlib.Path, tools: pathlib.Path, root: pathlib.Path):
    relative = path.relative_to(root)
    parts = path.relative_to(tools).parts
    room = parts[0] if len(parts) > 1 else None
    if room not in TOOLS_ROOMS:
        where = "directly in tools/" if room is None else f"in tools/{room}/, which is not a C++ room"
        yield f"{relative}:1: {where}; C++ files belong in one of tools/{{{','.join(TOOLS_ROOMS)}}}/"
        return
    allowed = [room] + TOOLS_ROOMS[room]
    for number, quote, header in includes(path):
        target = re.match(r"tools/([^/]+)/", header) if quote == '"' else None
        if target and target.group(1) not in allowed:
            may = " and ".join(f"tools/{name}/" for name in allowed)
            yield (f"{relative}:{number}: includes \"{header}\": tools/{room}/ may include only {may} of the tools "
                   f"(cli/ builds on bench/ and runs/, bench/ on runs/)")


def check_below_tools_file(path: pathlib.Path, root: pathlib.Path):
    relative = path.relative_to(root)
    for number, quote, header in includes(path):
        if quote == '"' and header.startswith("tools/"):
            yield (f"{relative}:{number}: includes \"{header}\": {relative.parts[0]}/ may not include tools/ "
                   f"(the tools build on it, not the other way round)")


PROPS_ROOMS = ["target", "lifecycle", "injections"]


def check_props_file(path: pathlib.Path, props: pathlib.Path, root: pathlib.Path):
    relative = path.relative_to(root)
    parts = path.relative_to(props).parts
    room = parts[0] if len(parts) > 1 else None
    if room is not None and room not in PROPS_ROOMS:
        yield (f"{relative}:1: in props/{room}/, which is not a room; files belong in props/ or one of "
               f"props/{{{','.join(PROPS_ROOMS)}}}/")
        return
    if room == "target":
        return
    for number, quote, header in includes(path):
        if quote == '"' and header.startswith("props/target/"):
            yield (f"{relative}:{number}: includes \"{header}\": only props/target/ includes the differential "
                   f"harness (zero3's properties never depend on it)")


def check_traces_file(path: pathlib.Path, traces: pathlib.Path, root: pathlib.Path):
    relative = path.relative_to(root)
    if path.relative_to(traces).parts[0] != "format":
        return
    for number, quote, header in includes(path):
        if quote == '"' and header.startswith("traces/replay/"):
            yield (f"{relative}:{number}: includes \"{header}\": traces/format/ never includes traces/replay/ "
                   f"(replay reads the format, not the other way round)")


def tools_source_files(tools: pathlib.Path):
    """tools/'s C++, less the layering fixtures (tools/testdata/ plants violations on purpose)."""
    return [p for p in source_files(tools) if "testdata" not in p.relative_to(tools).parts]


def source_files(folder: pathlib.Path):
    return sorted(p for p in folder.rglob("*") if p.suffix in (".h", ".cc", ".cu", ".cuh"))


def main(argv):
    root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
    core = root / "core"
    if not core.is_dir():
        print(f"check_layers: {core}: no such folder", file=sys.stderr)
        return 1
    files = source_files(core)
    violations = [v for path in files for v in check_file(path, core, root)]
    backend = root / "backend_cuda"
    backend_files = source_files(backend) if backend.is_dir() else []
    violations += [v for path in backend_files for v in check_backend_file(path, backend, root)]
    tools = root / "tools"
    tools_files = tools_source_files(tools) if tools.is_dir() else []
    violations += [v for path in tools_files for v in check_tools_file(path, tools, root)]
    below_files = [p for name in BELOW_TOOLS if (root / name).is_dir() for p in source_files(root / name)]
    violations += [v for path in below_files for v in check_below_tools_file(path, root)]
    props = root / "props"
    if props.is_dir():
        violations += [v for path in source_files(props) for v in check_props_file(path, props, root)]
    traces = root / "traces"
    if traces.is_dir():
        violations += [v for path in source_files(traces) for v in check_traces_file(path, traces, root)]
    for violation in violations:
        print(violation)
    print(f"check_layers: {len(files)} files under {core}, {len(backend_files)} under {backend}, "
          f"{len(tools_files)} under {tools}, {len(below_files)} under {', '.join(BELOW_TOOLS)}; "
          f"{len(violations)} violation(s)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
