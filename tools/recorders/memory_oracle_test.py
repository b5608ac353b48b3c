#!/usr/bin/env python3
"""The replay's activation model (tools/recorders/activation_model.py) over traces that
tools/recorders/record_memory_trace.py records, against torch's MemTracker on the same model
(tools/recorders/memory_oracle.py): small GPT-2- and Llama-shaped models (tools/recorders/memory_models.py), with and
without every layer checkpointed, each recorded once at 1 x 256 tokens and rescaled to other
micro-batches and sequence lengths; eager attention for the seq_len^2 split. Checks:

  * the model's activation peak is within 5 % of MemTracker's (ACT + TEMP after every op,
    parameter gradients left out) at every shape, with and without checkpointing;
  * the kept bytes of all invocations and the loss add up to MemTracker's ACT when backward starts;
  * eager attention's probabilities come out as seq_len^2 ("quadratic") amounts;
  * the trace names its recorder (tool, torch version, attention) and writes batch and seq_len.

    tools/recorders/memory_oracle_test.py [--python VENV_PYTHON]

Needs torch >= 2.5: without --python it uses the venv of tools/lib/diff_venv.sh (installing it when
missing) and re-executes itself there. About a minute on 2 cores. Exit 0 when all hold, else 1.
"""
import argparse
import os
import subprocess
import sys
import time

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tools/, above this room
VENV = os.environ.get("ZERO3_DIFF_VENV", os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                                      "zero3", "diff-venv"))
TOLERANCE = 0.05
RECORDED = (1, 256)
SHAPES = [(1, 256), (2, 256), (2, 128), (3, 512)]
MODELS = [("gpt2-small-test", "Block"), ("llama-small-test", "LlamaDecoderLayer")]


def reexec_in_venv(args):
    if args.python or os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    install = f"source {TOOLS}/lib/diff_venv.sh && zero3_install_diff_venv"
    if subprocess.run(["bash", "-c", install]).returncode != 0:
        sys.exit("memory_oracle_test: the runners' venv did not install (tools/lib/diff_venv.sh said why)")
    python = os.path.join(VENV, "bin", "python")
    os.execv(python, [python, __file__, *sys.argv[1:], "--python", python])


def act_at_backward_start(config, batch, seq_len):
    """MemTracker's ACT at the root's pre-backward snapshot (when backward starts)."""
    import torch
    import memory_models
    import record_memory_trace
    from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType, _ModState

    with record_memory_trace.fake_mode():
        model = memory_models.build(config)[0]
        data = record_memory_trace.token_batch(torch, batch, seq_len, memory_models.CONFIGS[config][1]["vocab"])
        tracker = MemTracker()
        tracker.track_external(model)
        with tracker:
            loss = record_memory_trace.plain_loss(model, data)
            loss.backward()
        snapshot = tracker.memory_tracking[model].snapshots[_ModState.PRE_BW][0]
        return next(iter(snapshot.values()))[_MemRefType.ACT]


def kept_total(trace):
    total = 0
    for event in trace["steps"][0]["events"]:
        if event[0] in ("enter", "call") and len(event) > 3:
            total += event[3] if isinstance(event[3], int) else sum(event[3].values())
        elif event[0] == "backward" and len(event) > 1:
            total += event[1] if isinstance(event[1], int) else sum(event[1].values())
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", help="the venv's python (default: tools/lib/diff_venv.sh's)")
    parser.add_argument("--zero3", help="the zero3 binary: its replay is held to MemTracker too, and to the "
                                        "reference model it implements")
    args = parser.parse_args()
    reexec_in_venv(args)
    sys.path.insert(0, TOOLS)
    import activation_model
    import memory_oracle
    import record_memory_trace

    import tempfile
    started = time.time()
    failures, checks = [], 0
    work = tempfile.mkdtemp(prefix="zero3-memory-oracle-")

    def check(ok, message):
        nonlocal checks
        checks += 1
        print(("ok    " if ok else "FAIL  ") + message, flush=True)
        if not ok:
            failures.append(message)

    for config, layer in MODELS:
        trace = record_memory_trace.record_plain(config, batch=RECORDED[0], seq_len=RECORDED[1])
        recorder = trace.get("recorder", {})
        check(recorder.get("tool") == "tools/recorders/record_memory_trace.py" and recorder.get("torch")
              and recorder.get("attention") == "sdpa" and (trace["batch"], trace["seq_len"]) == RECORDED,
              f"{config}: the trace names its recorder and says batch x seq_len {RECORDED}")
        act = act_at_backward_start(config, *RECORDED)
        kept = kept_total(trace)
        check(abs(kept - act) <= 1e-3 * act,
              f"{config}: kept bytes add up to MemTracker's ACT when backward starts ({kept:,} vs {act:,})")
        for batch, seq_len in SHAPES:
            for checkpoint in ((), (layer,)):
                measured = memory_oracle.plain_oracle(config, batch, seq_len, checkpoint)["activation_peak"]
                model = activation_model.activation_peak(trace, batch, seq_len, checkpoint)
                error = (model - measured) / measured
                where = f"{config} {batch} x {seq_len}{' checkpointing ' + layer if checkpoint else ''}"
                check(abs(error) <= TOLERANCE,
                      f"{where}: model {model / 1e6:.2f} MB vs MemTracker {measured / 1e6:.2f} MB ({100 * error:+.2f} %)")
                if args.zero3:
                    replayed = memory_oracle.replay_activation_peak(args.zero3, trace, batch, seq_len, checkpoint, work)
                    error = (replayed - measured) / measured
                    check(abs(error) <= TOLERANCE and abs(replayed - model) <= 1e-3 * model + 64,
                          f"{where}: zero3 replay {replayed / 1e6:.2f} MB vs MemTracker {measured / 1e6:.2f} MB "
                          f"({100 * error:+.2f} %), the reference model {model / 1e6:.2f} MB")

    config, layer = "llama-small-test", "LlamaDecoderLayer"
    trace = record_memory_trace.record_plain(config, batch=1, seq_len=256, attention="eager")
    quadratic = [e for e in trace["steps"][0]["events"]
                 if e[0] in ("enter", "call") and len(e) > 3 and isinstance(e[3], dict) and e[3].get("quadratic")]
    check(any(e[1].endswith("self_attn") for e in quadratic),
          f"{config} eager: the attention modules keep seq_len^2 bytes ({len(quadratic)} quadratic amounts)")
    for batch, seq_len in ((1, 512), (2, 128)):
        for checkpoint in ((), (layer,)):
            measured = memory_oracle.plain_oracle(config, batch, seq_len, checkpoint, attention="eager")["activation_peak"]
            model = activation_model.activation_peak(trace, batch, seq_len, checkpoint)
            error = (model - measured) / measured
            where = f"{config} eager {batch} x {seq_len}{' checkpointing ' + layer if checkpoint else ''}"
            check(abs(error) <= TOLERANCE,
                  f"{where}: model {model / 1e6:.2f} MB vs MemTracker {measured / 1e6:.2f} MB ({100 * error:+.2f} %)")
            if args.zero3:
                replayed = memory_oracle.replay_activation_peak(args.zero3, trace, batch, seq_len, checkpoint, work)
                error = (replayed - measured) / measured
                check(abs(error) <= TOLERANCE and abs(replayed - model) <= 1e-3 * model + 64,
                      f"{where}: zero3 replay {replayed / 1e6:.2f} MB vs MemTracker {measured / 1e6:.2f} MB "
                      f"({100 * error:+.2f} %), the reference model {model / 1e6:.2f} MB")

    print(f"{checks - len(failures)} passed, {len(failures)} failed ({time.time() - started:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
