"""Python modules shared by the scripts in tools/ (which put this package on the path simply by
sitting beside it): the PyTorch twin of a zero3 model spec (torch_model), safetensors files written
and read by hand (safetensors_io), and the parts of the outside oracle (oracle/, run by
tools/e2e/torch_oracle_test.py) and of the input-mutation fuzz (fuzz/, run by tools/e2e/input_fuzz.py).

torch is imported only by the modules that need it (torch_model, safetensors_io, oracle/), so the
fuzz runs under an interpreter without it.
"""
import os

# The repository root (this file is tools/zero3py/__init__.py).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
