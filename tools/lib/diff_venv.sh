# shellcheck shell=bash
# The Python environment of the differential runners (tools/zero3py/runners/): torch and DeepSpeed
# from PyPI in a virtualenv that does NOT see the system site packages (Debian's torch 1.13 would
# otherwise shadow or conflict with the pinned one). Sourced, not run:
#
#   source tools/lib/diff_venv.sh && zero3_install_diff_venv || exit 1
#   PYTHONPATH=tools "$ZERO3_DIFF_VENV/bin/python" -m zero3py.runners --target deepspeed
#
# Every installed package is pinned by tools/lib/diff_venv_constraints.txt, which is `pip freeze`
# of a venv where the two top-level pins installed and ran (regenerate it the same way when
# moving a pin). pip's cache (~/.cache/pip, or PIP_CACHE_DIR) is used: the torch wheel with its
# CUDA libraries is about 5 GB; the venv itself is kept in the user's cache (below).
#
# DeepSpeed is installed with DS_BUILD_OPS=0 (no C++/CUDA ops compiled; ZeRO-3 on CPU needs none)
# and runs with DS_ACCELERATOR=cpu, which the runners set. Its CPU accelerator calls `numactl`
# when it can find it and does without otherwise (Debian's numactl package is optional).
#
# Idempotent: a stamp in the venv records the pins and the interpreter, written once the imports
# worked; when it matches, nothing runs. Quiet on success; on failure it says why (with the tail
# of pip's log) and returns 1.

ZERO3_DIFF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Outside the checkout, in the user's cache: at 5.4 GB it is installed once per machine and pin set
# (the stamp below), not once per clone, so a fresh clone's CI run reuses it.
ZERO3_DIFF_VENV=${ZERO3_DIFF_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/zero3/diff-venv}
ZERO3_DIFF_CONSTRAINTS="$ZERO3_DIFF_ROOT/tools/lib/diff_venv_constraints.txt"

# The newest releases when this was written (tested: both seed bugs of issue 29 reproduce).
ZERO3_DIFF_PINS=(torch==2.15.0 deepspeed==0.19.8)

zero3_diff_log() { printf 'zero3: %s\n' "$*" >&2; }

zero3_diff_venv_works() {
  DS_ACCELERATOR=cpu "$ZERO3_DIFF_VENV/bin/python" - <<'EOF' 2>/dev/null
import torch, deepspeed, torch.distributed
assert torch.distributed.is_gloo_available()
# Not Debian's torch: the venv is isolated from the system site packages.
assert not torch.__file__.startswith("/usr/lib/python3/"), torch.__file__
EOF
}

zero3_install_diff_venv() {
  local python=${ZERO3_DIFF_PYTHON:-/usr/bin/python3}
  local stamp="$ZERO3_DIFF_VENV/zero3-diff.stamp"
  local wanted log="$ZERO3_DIFF_VENV.log"
  wanted="$("$python" -VV 2>/dev/null | head -1) ${ZERO3_DIFF_PINS[*]} $(cksum <"$ZERO3_DIFF_CONSTRAINTS")"
  # The stamp is written only after the imports worked; checking it imports nothing.
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && [ -x "$ZERO3_DIFF_VENV/bin/python" ]; then
    return 0
  fi
  if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
    zero3_diff_log "the runners' venv needs python3 with python3-venv (apt-get install python3-venv)"
    return 1
  fi
  if [ -e "$ZERO3_DIFF_VENV" ] && [ ! -f "$ZERO3_DIFF_VENV/pyvenv.cfg" ]; then
    zero3_diff_log "$ZERO3_DIFF_VENV exists and is not a virtualenv; remove it or set ZERO3_DIFF_VENV"
    return 1
  fi
  mkdir -p "$(dirname "$ZERO3_DIFF_VENV")"
  rm -rf "$ZERO3_DIFF_VENV"  # rebuilt whole: a stale or half-installed venv is never patched
  # torch first: DeepSpeed's setup.py imports it, so DeepSpeed builds without isolation against it.
  if ! "$python" -m venv "$ZERO3_DIFF_VENV" >"$log" 2>&1 ||
     ! "$ZERO3_DIFF_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
         -c "$ZERO3_DIFF_CONSTRAINTS" "${ZERO3_DIFF_PINS[0]}" setuptools wheel >>"$log" 2>&1 ||
     ! DS_BUILD_OPS=0 "$ZERO3_DIFF_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
         --no-build-isolation -c "$ZERO3_DIFF_CONSTRAINTS" "${ZERO3_DIFF_PINS[@]}" >>"$log" 2>&1; then
    tail -20 "$log" >&2
    zero3_diff_log "installing the runners' venv ($ZERO3_DIFF_VENV) failed; full log: $log"
    rm -rf "$ZERO3_DIFF_VENV"
    return 1
  fi
  if ! zero3_diff_venv_works; then
    DS_ACCELERATOR=cpu "$ZERO3_DIFF_VENV/bin/python" -c 'import torch, deepspeed' >&2
    zero3_diff_log "the runners' venv ($ZERO3_DIFF_VENV) was installed, but torch or deepspeed does not import"
    return 1
  fi
  echo "$wanted" >"$stamp"
  rm -f "$log"
}
