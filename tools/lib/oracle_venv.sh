# shellcheck shell=bash
# The Python environment of the outside oracle (tools/e2e/torch_oracle_test.py): Hugging Face
# transformers from PyPI in a virtualenv over Debian's system site packages, so that Debian's
# python3-torch (1.13) is the torch it uses and pip never pulls another one (--no-deps, every
# package pinned). Sourced, not run:
#
#   source tools/lib/oracle_venv.sh && zero3_install_oracle_venv || exit 1
#   "$ZERO3_ORACLE_VENV/bin/python" tools/e2e/torch_oracle_test.py build/tools/zero3
#
# Debian packages it needs (add them to ZERO3_PACKAGES): python3-venv python3-torch python3-numpy
# python3-requests python3-yaml python3-typing-extensions. The last four are modules transformers
# and huggingface_hub import, taken from Debian rather than PyPI.
#
# Idempotent and quiet on success, as tools/lib/venv.sh keeps every venv; on failure it says why
# and returns 1.

# tools/e2e/torch_oracle_test.py looks in build/oracle-venv, or in $ZERO3_ORACLE_VENV when set.
ZERO3_ORACLE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ZERO3_ORACLE_VENV=${ZERO3_ORACLE_VENV:-${ZERO3_BUILD_DIR:-$ZERO3_ORACLE_ROOT/build}/oracle-venv}

# transformers 4.40.2 is tested with Debian 12's torch 1.13.0a0 (GPT2LMHeadModel imports and trains
# in f32 and bf16); the other pins are the releases current with it, meeting its requirements. tokenizers is left out: GPT2LMHeadModel does not
# need it, and transformers only checks its version when it is installed (`pip check` names it).
ZERO3_ORACLE_PINS=(transformers==4.40.2 huggingface_hub==0.23.0 safetensors==0.4.3 regex==2024.4.28
                   tqdm==4.66.4 packaging==24.0 filelock==3.14.0 fsspec==2024.3.1)

# shellcheck source=tools/lib/venv.sh
source "$ZERO3_ORACLE_ROOT/tools/lib/venv.sh"

zero3_oracle_venv_works() {
  "$ZERO3_ORACLE_VENV/bin/python" - <<'EOF' 2>/dev/null
import torch, transformers, safetensors
from transformers import GPT2Config, GPT2LMHeadModel
# The system torch, not one from PyPI.
assert torch.__file__.startswith("/usr/lib/python3/dist-packages/"), torch.__file__
EOF
}

zero3_oracle_venv_explain() {
  "$ZERO3_ORACLE_VENV/bin/python" -c 'import torch; print("torch from", torch.__file__)
from transformers import GPT2LMHeadModel'
}

# Over Debian's system site packages, every package pinned and --no-deps: pip resolves nothing.
zero3_oracle_venv_create() {
  /usr/bin/python3 -m venv --system-site-packages "$ZERO3_ORACLE_VENV" >>"$1" 2>&1 &&
    "$ZERO3_ORACLE_VENV/bin/python" -m pip install --quiet --no-deps --disable-pip-version-check \
      "${ZERO3_ORACLE_PINS[@]}" >>"$1" 2>&1
}

zero3_install_oracle_venv() {
  local python=/usr/bin/python3 wanted stamp="$ZERO3_ORACLE_VENV/zero3-oracle.stamp"
  wanted="$("$python" -VV 2>/dev/null | head -1) ${ZERO3_ORACLE_PINS[*]}"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
    if [ ! -x "$python" ] || ! "$python" -c 'import torch' 2>/dev/null; then
      zero3_venv_log "the oracle needs Debian's python3 with python3-torch (apt-get install python3-torch)"
      return 1
    fi
    if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
      zero3_venv_log "the oracle venv needs python3-venv (apt-get install python3-venv)"
      return 1
    fi
  fi
  zero3_venv_ensure "the oracle venv" "$ZERO3_ORACLE_VENV" "$stamp" "$wanted" \
    fresh zero3_oracle_venv_create zero3_oracle_venv_works zero3_oracle_venv_explain
}
