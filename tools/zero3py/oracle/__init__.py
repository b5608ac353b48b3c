"""The outside oracle's parts (tools/e2e/torch_oracle_test.py runs them; its docstring says what is
compared and why the tolerances are what they are): settings (the runs' sizes, config, tolerances
and models), models (the oracle's torch models and their check against zero3's spec), data (llm.c
token files), torch_side (training in torch as zero3 trains), zero3_side (running zero3 and
checking what it wrote), compare (weight differences) and case (one model x dtype, end to end).
"""
