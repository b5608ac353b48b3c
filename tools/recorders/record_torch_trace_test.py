#!/usr/bin/env python3
"""CTest check of tools/recorders/record_torch_trace.py without pytest: records the demo model (a tied head
reached through F.linear), checks the trace's JSON itself (the batch and seq_len it was recorded
at, which replay rescales from; explicit flops on the tied head; inconsistent batch/seq_len/tokens
arguments refused before recording), and last replays it with `zero3 replay`, which must accept
the trace, see the tied weight as an external parameter, find nothing wrong, and predict a
non-zero compute time. When the interpreter has transformers, `--hf gpt2` is recorded too (tiny).
Run it with the interpreter that has PyTorch: Debian's /usr/bin/python3 with python3-torch, which
tools/lib/build.sh installs; without PyTorch it fails and says so (CTest must not skip it).

    tools/recorders/record_torch_trace_test.py build/tools/zero3
"""
import importlib.util
import json
import re
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def shape_problems(trace):
    """What traces/FORMAT.md's batch/seq_len rules and the {"linear", "quadratic"} slots forbid."""
    problems = []
    batch, seq_len = trace.get("batch"), trace.get("seq_len")
    if (batch is None) != (seq_len is None):
        problems.append(f"batch {batch} and seq_len {seq_len} must be given together")
    if batch is not None:
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (batch, seq_len)):
            problems.append(f"batch {batch!r} and seq_len {seq_len!r} must be integers >= 1")
        elif trace.get("tokens") != batch * seq_len:
            problems.append(f"tokens {trace.get('tokens')} is not batch {batch} * seq_len {seq_len}")
    for step in trace["steps"]:
        for event in step["events"]:
            if event[0] not in ("enter", "call"):
                continue
            for slot in event[2:4]:
                if isinstance(slot, dict):
                    if set(slot) != {"linear", "quadratic"} or not all(
                            isinstance(v, int) and v >= 0 for v in slot.values()):
                        problems.append(f"{event}: a split slot is {{\"linear\": n, \"quadratic\": n}} with n >= 0")
                elif slot is not None and not (isinstance(slot, (int, float)) and slot >= 0):
                    problems.append(f"{event}: flops and activation bytes are numbers >= 0, null or split")
    return problems


def argument_problems(torch):
    """record()'s batch/seq_len/tokens arguments: defaults, overrides, and refusals."""
    import record_torch_trace as rec
    problems = []
    model = rec.demo_model(torch)
    ids = torch.randint(0, 64, (2, 8))
    loss_fn = lambda logits, targets: torch.nn.functional.cross_entropy(logits.reshape(-1, 64), targets.reshape(-1))
    for kwargs, expected in (({"tokens": 16}, (16, None, None)), ({"batch": 4}, (16, 4, 4)),
                             ({"batch": 1, "seq_len": 16, "tokens": 16}, (16, 1, 16))):
        trace = rec.record(model, [(ids, ids)], loss_fn, **kwargs)
        got = (trace["tokens"], trace.get("batch"), trace.get("seq_len"))
        if got != expected:
            problems.append(f"record(**{kwargs}) wrote tokens, batch, seq_len {got}, not {expected}")
    for kwargs in ({"batch": 3, "tokens": 16}, {"batch": 2, "seq_len": 8, "tokens": 10}, {"batch": 3},
                   {"seq_len": 0}, {"batch": 2.0, "seq_len": 8}):
        try:
            rec.record(model, [(ids, ids)], loss_fn, **kwargs)
            problems.append(f"record(**{kwargs}) on a (2, 8) input did not raise ValueError")
        except ValueError as error:
            if "record()" not in str(error):
                problems.append(f"record(**{kwargs}) raised an unclear ValueError: {error}")
    for shape, dtype, expected in (((5,), torch.long, (5, 1)), ((4, 3, 7), torch.float32, (4, 3)),
                                   ((6, 10), torch.float32, (6, 1))):
        got = rec.input_shape(torch, torch.zeros(shape, dtype=dtype))
        if got != expected:
            problems.append(f"input_shape of a {dtype} {shape} input is {got}, not {expected}")
    return problems


def hf_problems(folder):
    """A one-layer GPT-2 through `--hf`, only where this interpreter has transformers."""
    if importlib.util.find_spec("transformers") is None:
        print(f"note: {sys.executable} has no transformers; --hf is not tested here")
        return []
    path, config = os.path.join(folder, "hf.json"), os.path.join(folder, "config.json")
    with open(config, "w") as out:
        json.dump({"n_embd": 64, "n_head": 4, "vocab_size": 256, "n_positions": 64}, out)
    subprocess.run([sys.executable, os.path.join(HERE, "record_torch_trace.py"), "--hf", "gpt2", path, "--layers", "1",
                    "--batch", "2", "--seq-len", "32", "--config-json", config], check=True)
    trace = json.load(open(path))
    problems = shape_problems(trace)
    if (trace.get("batch"), trace.get("seq_len"), trace.get("tokens")) != (2, 32, 64):
        problems.append("--hf gpt2 --batch 2 --seq-len 32 did not write batch 2, seq_len 32, tokens 64")
    events = {e[1]: e for step in trace["steps"] for e in step["events"] if e[0] in ("enter", "call")}
    dropout = events.get("transformer.h.0.attn.attn_dropout", [])
    if len(dropout) < 4 or dropout[3] != {"linear": 0, "quadratic": 2 * 4 * 32 * 32 * 4}:
        problems.append(f"eager GPT-2's attention probabilities were not split as quadratic: {dropout}")
    return problems


def main():
    if len(sys.argv) != 2:
        print("usage: record_torch_trace_test.py PATH_TO_ZERO3", file=sys.stderr)
        return 1
    try:
        import torch  # noqa: F401
    except ImportError:
        print(f"FAIL: {sys.executable} cannot import torch: apt-get install python3-torch (tools/lib/build.sh does)")
        return 1
    zero3 = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        trace_path = os.path.join(folder, "demo.json")
        report_path = os.path.join(folder, "report.json")
        subprocess.run([sys.executable, os.path.join(HERE, "record_torch_trace.py"), "--demo", trace_path], check=True)
        trace = json.load(open(trace_path))
        failures += shape_problems(trace)
        if (trace.get("batch"), trace.get("seq_len"), trace.get("tokens")) != (2, 8, 16):
            failures.append(f"the demo's (2, 8) token ids were recorded as batch {trace.get('batch')}, "
                            f"seq_len {trace.get('seq_len')}, tokens {trace.get('tokens')}, not 2, 8, 16")
        events = [e for step in trace["steps"] for e in step["events"]]
        if ["enter", "head", 2 * 16 * 64 * 32, 2 * 8 * 64 * 4] not in events:
            failures.append("the tied head (which owns no weight) has no explicit 2 * tokens * vocab * width flops")
        if ["param", "head", "wte.weight"] not in events:
            failures.append("the tied head's use of wte.weight was not recorded as a checked access by 'head'")
        if not any(e[0] == "call" and e[1] == "blocks.0.fc" for e in events):
            failures.append("a Linear using its own weight and bias was not compacted into a 'call' event")
        failures += argument_problems(torch)
        failures += hf_problems(folder)
        # Last: the main tree's reader accepts batch/seq_len once the format lands.
        replay = subprocess.run([zero3, "replay", trace_path, "--ranks", "4", "--report", report_path],
                                capture_output=True, text=True)
        print(replay.stdout)
        if replay.returncode != 0:
            failures.append(f"zero3 replay exited {replay.returncode}: {replay.stderr.strip()}")
        else:
            report = json.load(open(report_path))
            if report["engine_counters"]["external_registrations"] < 1:
                failures.append("replay registered no external parameter for the tied head")
            if report["checks"]["findings"]:
                failures.append(f"replay found problems: {report['checks']['findings']}")
            # The recorder writes the tokens per micro-step, from which replay derives the flops.
            compute_s = report["time"]["steps"][-1]["compute_s"]
            if not compute_s > 0:
                failures.append(f"the demo trace predicts {compute_s} s of compute (no tokens recorded?)")
            if re.search(r"\(compute 0\.0+ ", replay.stdout):
                failures.append("the summary prints the demo's compute time as zero")
    for failure in failures:
        print("FAIL: " + failure)
    print("record_torch_trace: " + ("ok" if not failures else f"{len(failures)} failures"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
