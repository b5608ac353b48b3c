"""Python modules shared by the scripts in tools/ (which put this package on the path simply by
sitting beside it): the PyTorch twin of a zero3 model spec (torch_model), safetensors files written
and read by hand (safetensors_io), and the parts of the outside oracle (oracle/, run by
tools/torch_oracle_test.py).
"""
import os

# The repository root (this file is tools/zero3py/__init__.py).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
