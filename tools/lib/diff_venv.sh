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
# Idempotent and quiet on success, as tools/lib/venv.sh keeps every venv; on failure it says why
# and returns 1.

ZERO3_DIFF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Outside the checkout, in the user's cache: at 5.4 GB it is installed once per machine and pin set
# (the stamp below), not once per clone, so a fresh clone's CI run reuses it.
ZERO3_DIFF_VENV=${ZERO3_DIFF_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/zero3/diff-venv}
ZERO3_DIFF_CONSTRAINTS="$ZERO3_DIFF_ROOT/tools/lib/diff_venv_constraints.txt"

# The newest releases when this was written (tested: both seed bugs of issue 29 reproduce).
ZERO3_DIFF_PINS=(torch==2.15.0 deepspeed==0.19.8)

# shellcheck source=tools/lib/venv.sh
source "$ZERO3_DIFF_ROOT/tools/lib/venv.sh"

zero3_diff_venv_works() {
  DS_ACCELERATOR=cpu "$ZERO3_DIFF_VENV/bin/python" - <<'EOF' 2>/dev/null
import torch, deepspeed, torch.distributed
assert torch.distributed.is_gloo_available()
# Not Debian's torch: the venv is isolated from the system site packages.
assert not torch.__file__.startswith("/usr/lib/python3/"), torch.__file__
EOF
}

zero3_diff_venv_explain() { DS_ACCELERATOR=cpu "$ZERO3_DIFF_VENV/bin/python" -c 'import torch, deepspeed'; }

# torch first: DeepSpeed's setup.py imports it, so DeepSpeed builds without isolation against it.
zero3_diff_venv_create() {
  "${ZERO3_DIFF_PYTHON:-/usr/bin/python3}" -m venv "$ZERO3_DIFF_VENV" >>"$1" 2>&1 &&
    "$ZERO3_DIFF_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
      -c "$ZERO3_DIFF_CONSTRAINTS" "${ZERO3_DIFF_PINS[0]}" setuptools wheel >>"$1" 2>&1 &&
    DS_BUILD_OPS=0 "$ZERO3_DIFF_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
      --no-build-isolation -c "$ZERO3_DIFF_CONSTRAINTS" "${ZERO3_DIFF_PINS[@]}" >>"$1" 2>&1
}

zero3_install_diff_venv() {
  local python=${ZERO3_DIFF_PYTHON:-/usr/bin/python3} wanted stamp="$ZERO3_DIFF_VENV/zero3-diff.stamp"
  wanted="$("$python" -VV 2>/dev/null | head -1) ${ZERO3_DIFF_PINS[*]} $(cksum <"$ZERO3_DIFF_CONSTRAINTS")"
  if { [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; } && ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
    zero3_venv_log "the runners' venv needs python3 with python3-venv (apt-get install python3-venv)"
    return 1
  fi
  zero3_venv_ensure "the runners' venv" "$ZERO3_DIFF_VENV" "$stamp" "$wanted" \
    fresh zero3_diff_venv_create zero3_diff_venv_works zero3_diff_venv_explain
}

# Hugging Face transformers in the same venv, for the memory recorder and its oracle
# (tools/recorders/record_memory_trace.py --hf, tools/recorders/memory_oracle.py): models built from their config
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

zero3_diff_hf_explain() { "$ZERO3_DIFF_VENV/bin/python" -c 'from transformers import AutoModelForCausalLM'; }

zero3_diff_hf_add() {
  "$ZERO3_DIFF_VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    "${ZERO3_DIFF_HF_PINS[@]}" >>"$1" 2>&1
}

zero3_install_diff_venv_transformers() {
  zero3_install_diff_venv || return 1
  zero3_venv_ensure "transformers in the runners' venv" "$ZERO3_DIFF_VENV" "$ZERO3_DIFF_VENV/zero3-diff-hf.stamp" \
    "${ZERO3_DIFF_HF_PINS[*]}" layer zero3_diff_hf_add zero3_diff_hf_works zero3_diff_hf_explain
}
