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

# Hugging Face transformers in the same venv, for the memory recorder and its oracle
# (tools/record_memory_trace.py --hf, tools/memory_oracle.py): models built from their config
# classes alone (no weights, no network) over the venv's torch 2.15, never over Debian's packages.
# A second stamp: adding it never rebuilds the 5.4 GB venv, only installs these on top (and the venv
# rebuilt by zero3_install_diff_venv loses this stamp with it). --no-deps with every package pinned,
# so pip resolves nothing and touches nothing that is there: transformers 5.23.0 with the modules
# it and huggingface_hub import to build GPT2 / Llama / Mixtral / T5 from a config (tested);
# tokenizers, hf-xet, typer, click and anyio are left out (a tokenizer, hub downloads and the CLI
# are not used; `pip check` names them).
ZERO3_DIFF_HF_PINS=(transformers==5.23.0 huggingface-hub==2.4.0 safetensors==0.8.0 regex==2026.11.15
                    pyyaml==6.0.3 httpx2==2.17.0 httpcore2==2.17.0 h11==0.16.0 idna==3.21 truststore==0.10.5)

zero3_diff_hf_works() {
  "$ZERO3_DIFF_VENV/bin/python" - <<'EOF2' 2>/dev/null
import transformers
from transformers import AutoConfig, AutoModelForCausalLM
model = AutoModelForCausalLM.from_config(AutoConfig.for_model(
    "llama", hidden_size=64, intermediate_size=128, num_attention_heads=4, num_hidden_layers=1, vocab_size=128))
EOF2
}

zero3_install_diff_venv_transformers() {
  zero3_install_diff_venv || return 1
  local stamp="$ZERO3_DIFF_VENV/zero3-diff-hf.stamp"
  local wanted log="$ZERO3_DIFF_VENV.hf.log"
  wanted="${ZERO3_DIFF_HF_PINS[*]}"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    return 0
  fi
  if ! "$ZERO3_DIFF_VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
         "${ZERO3_DIFF_HF_PINS[@]}" >"$log" 2>&1; then
    tail -20 "$log" >&2
    zero3_diff_log "installing transformers into the runners' venv ($ZERO3_DIFF_VENV) failed; full log: $log"
    return 1
  fi
  if ! zero3_diff_hf_works; then
    "$ZERO3_DIFF_VENV/bin/python" -c 'from transformers import AutoModelForCausalLM' >&2
    zero3_diff_log "transformers was installed into $ZERO3_DIFF_VENV, but does not import or build a model"
    return 1
  fi
  echo "$wanted" >"$stamp"
  rm -f "$log"
}
