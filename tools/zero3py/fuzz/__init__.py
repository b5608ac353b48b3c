"""The input-mutation fuzz's parts (tools/e2e/input_fuzz.py runs them; its docstring says what a case
does and what counts as a finding): inputs (the valid seed inputs and how config mutants are
capped), mutate (the seeded mutators: JSON-aware and byte-level), checkpoints (re-signing a mutated
checkpoint), judge (a command's outcome classified: acceptable or a finding) and runner (the seed
inputs checked, one case mutated and run, the exit codes tallied). No torch: these run under any
Python 3.
"""
