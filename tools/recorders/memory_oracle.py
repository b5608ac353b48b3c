#!/usr/bin/env python3
"""The outside oracle for zero3's activation memory: the same model, micro-batch, sequence, dtype and
activation checkpointing run under torch's own memory trackers on fake tensors (no memory, seconds),
next to the replay's reference model (tools/recorders/activation_model.py) over a trace recorded once by
tools/recorders/record_memory_trace.py and rescaled to each shape. Needs torch >= 2.5 (tools/lib/diff_venv.sh).

    memory_oracle.py gpt2-124m --batch 4 --seq-len 1024 [--checkpoint Block]   # one run, JSON
    memory_oracle.py --fsdp2 llama-1.3b --batch 1 --seq-len 4096 --world 8       # FSDPMemTracker
    memory_oracle.py --table                                                      # traces/README.md's table

MemTracker (torch.distributed._tools.mem_tracker) categorizes every storage an op makes: ACT in
forward (and in a checkpointed module's recomputation), TEMP in backward, GRAD once a parameter's
gradient hook sees it. The activation peak is the max of ACT + TEMP over every op (a MemTracker
subclass samples it where MemTracker updates its peaks), with each parameter gradient left out
from the op that made it (MemTracker counts it as TEMP until the hook, just after that op; zero3
accounts gradients itself, in its `grad` category): `activation_peak`. Also reported:
`act_temp_per_op` (MemTracker's own categories, gradients in TEMP until their hook) and
`activation_peak_snapshots`, the max over MemTracker's snapshots (every module's pre/post/peak,
forward and backward, and its global peak) of ACT + TEMP. The snapshots miss the activation peak:
MemTracker takes a module's peak snapshot where its *total* peaks, which in backward is where
parameter gradients have piled up (Llama 1.3B, 1 x 1,024, every layer checkpointed: 0.35 GB over
the snapshots, 0.48 GB at the loss's backward, before any gradient exists).

The FSDP2 run: FSDPMemTracker with W ranks on a fake process group (torch.testing._internal's fake
backend, as torch's own tests), fully_shard per layer and at the root with
MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=f32), f32 sharded parameters, AdamW; two
iterations (the second has the optimizer states); per-rank peak by category.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import activation_model  # noqa: E402
import record_memory_trace  # noqa: E402

if __name__ == "__main__":
    record_memory_trace.require_torch("memory_oracle.py")
import memory_models  # noqa: E402

GB = 1e9


def checkpoint_modules(model, types):
    """Wraps the forward of each outermost module whose type or name is in `types` in
    torch.utils.checkpoint.checkpoint(use_reentrant=False). Returns how many."""
    import torch.utils.checkpoint

    types = set(types)
    wrapped = []
    for name, module in model.named_modules():
        if type(module).__name__ not in types and name not in types:
            continue
        if any(name.startswith(w + ".") for w in wrapped if w):
            continue
        original = module.forward

        def forward(*args, _original=original, **kwargs):
            return torch.utils.checkpoint.checkpoint(_original, *args, use_reentrant=False, **kwargs)

        module.forward = forward
        wrapped.append(name)
    return len(wrapped)


def _tracker_class():
    from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType, _UpdateType

    class Tracker(MemTracker):
        """MemTracker that also keeps ACT + TEMP after every op, and which of its storages turned
        out to be parameter gradients (MemTracker moves them from TEMP to GRAD when the
        parameter's hook sees them, after the op that made them)."""

        def __init__(self):
            super().__init__()
            self.samples = []  # ACT + TEMP after each op
            self.created = {}  # id(winfo) -> the sample its storage first appears in
            self.gradients = []  # (first sample, end sample, bytes)
            self.open_gradients = {}  # id(winfo) -> first sample: gradients seen leaving a node

        def gradient(self, tensor):
            """A gradient an autograd node hands to a parameter (record_memory_trace.gradient_marker)."""
            from torch.distributed._tools.common_utils import get_untyped_storages
            for storage in get_untyped_storages(tensor):
                winfo, _ = self._WINFO.get(storage, (None, None))
                if (winfo is not None and winfo.reftype in (_MemRefType.ACT, _MemRefType.TEMP)
                        and id(winfo) not in self.open_gradients):
                    self.open_gradients[id(winfo)] = self.created.get(id(winfo), len(self.samples))

        def _update_snap(self, u_type, winfo, old_mem_consumed=None, old_reftype=None):
            if u_type == _UpdateType.ADD:
                self.created[id(winfo)] = len(self.samples)
            elif id(winfo) in self.open_gradients and (
                    u_type == _UpdateType.DEL or (u_type == _UpdateType.REF and winfo.reftype == _MemRefType.GRAD)):
                self.gradients.append((self.open_gradients.pop(id(winfo)), len(self.samples), winfo.mem_consumed))
            elif (u_type == _UpdateType.REF and winfo.reftype == _MemRefType.GRAD
                  and old_reftype in (_MemRefType.ACT, _MemRefType.TEMP)):
                self.gradients.append((self.created.get(id(winfo), len(self.samples)), len(self.samples),
                                       winfo.mem_consumed))
            super()._update_snap(u_type, winfo, old_mem_consumed, old_reftype)

        def _update_peak_stats(self, peak_state):
            super()._update_peak_stats(peak_state)
            snap = next(iter(self._curr_mem_snap.values()), {})
            self.samples.append(snap.get(_MemRefType.ACT, 0) + snap.get(_MemRefType.TEMP, 0))

        def activation_peaks(self):
            """(max of ACT + TEMP over ops, the same with every parameter gradient left out from the
            op that made it)."""
            correction = [0] * (len(self.samples) + 1)
            for first, end, nbytes in self.gradients:
                correction[first] += nbytes
                correction[end] -= nbytes
            running, without = 0, 0
            for i, value in enumerate(self.samples):
                running += correction[i]
                without = max(without, value - running)
            return max(self.samples, default=0), without

    return Tracker, _MemRefType


def memtracker(make_model, batch, seq_len, vocab, checkpoint=(), loss_fn=record_memory_trace.plain_loss):
    """One training micro-step of make_model() (built in FakeTensorMode) under MemTracker."""
    import torch

    Tracker, Ref = _tracker_class()
    started = time.time()
    with record_memory_trace.fake_mode():
        model = make_model()
        wrapped = checkpoint_modules(model, checkpoint) if checkpoint else 0
        if checkpoint and not wrapped:
            raise ValueError(f"no module of type or name {sorted(checkpoint)} to checkpoint")
        data = record_memory_trace.token_batch(torch, batch, seq_len, vocab)
        tracker = Tracker()
        tracker.track_external(model)
        with tracker, record_memory_trace.gradient_marker(tracker.gradient):
            loss = loss_fn(model, data)
            loss.backward()
            del loss
        act_temp = 0
        for stats in tracker.memory_tracking.values():
            for snapshots in stats.snapshots.values():
                for snapshot in snapshots:
                    for dev in snapshot.values():
                        act_temp = max(act_temp, dev.get(Ref.ACT, 0) + dev.get(Ref.TEMP, 0))
        peak = next(iter(tracker.get_tracker_snapshot("peak").values()))
        act_temp = max(act_temp, peak.get(Ref.ACT, 0) + peak.get(Ref.TEMP, 0))
    per_op, without_gradients = tracker.activation_peaks()
    return {"activation_peak": without_gradients, "act_temp_per_op": per_op, "activation_peak_snapshots": act_temp,
            "total_peak": peak["Total"], "at_total_peak": {
                "activation": peak.get(Ref.ACT, 0), "temp": peak.get(Ref.TEMP, 0),
                "parameters": peak.get(Ref.PARAM, 0), "gradients": peak.get(Ref.GRAD, 0)},
            "checkpointed_modules": wrapped, "seconds": round(time.time() - started, 1)}


def plain_oracle(config, batch, seq_len, checkpoint=(), attention="sdpa", **overrides):
    kind, fields = memory_models.CONFIGS[config]
    if seq_len > fields["context"]:
        overrides = dict(overrides, context=seq_len)
    make = lambda: memory_models.build(config, attention=attention, **overrides)[0]
    return memtracker(make, batch, seq_len, fields["vocab"], checkpoint)


def hf_oracle(model_type, batch, seq_len, checkpoint=(), overrides=None, seq2seq=False, attention="sdpa"):
    make = lambda: record_memory_trace.build_hf(model_type, overrides, None, attention, seq2seq)[0]
    vocab = (overrides or {}).get("vocab_size", 32000)
    return memtracker(make, batch, seq_len, vocab, checkpoint, record_memory_trace.hf_loss)


# --- FSDP2 ---------------------------------------------------------------------------------------------
def fsdp2(config, batch, seq_len, world=8, checkpoint=(), attention="sdpa"):
    """Per-rank peak by category of FSDP2 (fully_shard per layer and root, bf16 compute, f32 reduce,
    f32 sharded parameters, AdamW) under FSDPMemTracker on a fake process group of `world` ranks."""
    import torch
    import torch.distributed as dist
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    kind, fields = memory_models.CONFIGS[config]
    overrides = {"context": seq_len} if seq_len > fields["context"] else {}
    started = time.time()
    if not dist.is_initialized():
        dist.init_process_group("fake", rank=0, world_size=world, store=FakeStore())
    try:
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (world,))  # outside FakeTensorMode: its mesh tensor is real
        with record_memory_trace.fake_mode():
            model = memory_models.build(config, attention=attention, dtype=torch.float32, **overrides)[0]
            layer_type = memory_models.LAYER_TYPES[kind]
            policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            if checkpoint:
                checkpoint_modules(model, checkpoint)
            for module in model.modules():
                if type(module).__name__ == layer_type:
                    fully_shard(module, mesh=mesh, mp_policy=policy)
            fully_shard(model, mesh=mesh, mp_policy=policy)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            data = record_memory_trace.token_batch(torch, batch, seq_len, fields["vocab"])
            tracker = FSDPMemTracker(model, optimizer)
            tracker.track_inputs((data["input_ids"], data["labels"]))
            with tracker:
                for iteration in range(2):
                    loss = model(data["input_ids"], data["labels"])
                    loss.backward()
                    del loss
                    optimizer.step()
                    optimizer.zero_grad()
                    if iteration == 0:
                        tracker.reset_mod_stats()
            peak = next(iter(tracker.get_tracker_snapshot("peak").values()))
    finally:
        dist.destroy_process_group()
    return {"world": world, "per_rank_peak": {str(getattr(k, "value", k)): v for k, v in peak.items()},
            "seconds": round(time.time() - started, 1)}


# --- the table -----------------------------------------------------------------------------------------
TABLE_MODELS = [("gpt2-124m", 1024), ("llama-1.3b", 4096), ("llama-2-7b", 4096)]
# Issue 37's two Llama-2-7B runs: 4 x 4,096 without checkpointing is in the table; this is the other.
TABLE_EXTRA = {"llama-2-7b": [(48, 4096, True)]}


def compare(trace, oracle_run, batch, seq_len, checkpoint):
    model = activation_model.activation_peak(trace, batch, seq_len, checkpoint)
    measured = oracle_run["activation_peak"]
    return {"model": model, "memtracker": measured, "error": (model - measured) / measured}


def replay_activation_peak(zero3, trace, batch, seq_len, checkpoint, work):
    """The activation peak `zero3 replay` predicts for the trace at one rank (its report's
    memory.per_rank[0].categories.activation), rescaled to batch x seq_len."""
    path, report = os.path.join(work, "trace.json"), os.path.join(work, "report.json")
    with open(path, "w") as file:
        json.dump(trace, file)
    command = [zero3, "replay", path, "--ranks", "1", "--micro-batch", str(batch), "--seq-len", str(seq_len),
               "--no-fit-advice", "--report", report] + (["--checkpoint-activations", ",".join(checkpoint)] if checkpoint else [])
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: exit {run.returncode}: {run.stderr[-1500:]}")
    with open(report) as file:
        return json.load(file)["memory"]["per_rank"][0]["categories"]["activation"]["bytes"]


def table(models=TABLE_MODELS, batches=(1, 4), seqs=(1024, 4096), log=print, zero3=None):
    """Rows of replay vs MemTracker: each model recorded once (batch 1 at its recording length)
    and rescaled to every micro-batch and sequence length; with `zero3` (the binary) the replay
    column is `zero3 replay`'s own activation peak, else the reference model's."""
    work = tempfile.mkdtemp(prefix="zero3-memory-table-")
    rows = []
    for config, record_seq in models:
        kind, _ = memory_models.CONFIGS[config]
        layer = memory_models.LAYER_TYPES[kind]
        started = time.time()
        trace = record_memory_trace.record_plain(config, batch=1, seq_len=record_seq)
        log(f"# {config}: recorded at 1 x {record_seq} in {time.time() - started:.1f} s")
        shapes = [(batch, seq, checkpoint) for seq in seqs for batch in batches for checkpoint in (False, True)]
        for batch, seq, checkpointed in shapes + TABLE_EXTRA.get(config, []):
            checkpoint = (layer,) if checkpointed else ()
            run = plain_oracle(config, batch, seq, checkpoint)
            compared = compare(trace, run, batch, seq, checkpoint)
            if zero3:
                compared["model"] = replay_activation_peak(zero3, trace, batch, seq, checkpoint, work)
                compared["error"] = (compared["model"] - compared["memtracker"]) / compared["memtracker"]
            row = dict(model_name=config, batch=batch, seq_len=seq, checkpoint=",".join(checkpoint) or "-",
                       **compared,
                       snapshots=run["activation_peak_snapshots"], per_op=run["act_temp_per_op"],
                       at_total_peak=run["at_total_peak"], total_peak=run["total_peak"], seconds=run["seconds"])
            rows.append(row)
            log(format_row(row))
    return rows


# Sharded runs against FSDP2's tracker at 8 ranks: (model, micro-batch, sequence, checkpointed).
FSDP2_ROWS = [("gpt2-124m", 4, 1024, False), ("gpt2-124m", 4, 1024, True), ("llama-1.3b", 1, 4096, False),
              ("llama-2-7b", 1, 4096, False), ("llama-2-7b", 1, 4096, True)]
# The config a Trainer user writes: bf16, ZeRO-3, bucket sizes "auto" (from the hidden size).
TRAINER_CONFIG = {"bf16": {"enabled": True}, "zero_optimization": {
    "stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
    "stage3_param_persistence_threshold": "auto"}}


def replay_rank_peak(zero3, trace, world, batch, seq_len, checkpoint, work):
    """zero3 replay's per-rank peak (total and by category) at `world` ranks under TRAINER_CONFIG."""
    path, report, config = (os.path.join(work, name) for name in ("trace.json", "report.json", "config.json"))
    with open(path, "w") as file:
        json.dump(trace, file)
    with open(config, "w") as file:
        json.dump(TRAINER_CONFIG, file)
    command = [zero3, "replay", path, "--ranks", str(world), "--micro-batch", str(batch), "--seq-len", str(seq_len),
               "--config", config, "--no-fit-advice", "--report", report] + \
              (["--checkpoint-activations", ",".join(checkpoint)] if checkpoint else [])
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: exit {run.returncode}: {run.stderr[-1500:]}")
    with open(report) as file:
        rank = json.load(file)["memory"]["per_rank"][0]
    return rank["peak_total"]["bytes"], {name: moment["bytes"] for name, moment in rank["categories"].items()}


def fsdp2_table(zero3, world=8, log=print):
    """Per-rank total peak: zero3 replay against FSDP2 under FSDPMemTracker, with the two terms they
    differ by by design named (both held the whole run, so their category peaks are what the total
    holds of them): zero3 keeps a compute-dtype (bf16) parameter shard beside its f32 master, where
    FSDP2's MixedPrecisionPolicy casts its f32 shard at each all-gather; and zero3 keeps its f32
    gradient shards allocated between steps (as DeepSpeed does), where FSDP2's gradients are freed
    by zero_grad(set_to_none=True): counted only where FSDP2's peak holds no sharded gradient (a
    peak early in backward), since elsewhere both hold one."""
    work = tempfile.mkdtemp(prefix="zero3-fsdp2-table-")
    log("| model | micro-batch x tokens | checkpointed | FSDP2 per rank (GB) | zero3 per rank (GB) | difference | "
        "by design: zero3's bf16 parameter shard (+ its f32 gradient shard where FSDP2's peak holds none) (GB) | difference without them |\n"
        "|---|---|---|---|---|---|---|---|")
    rows = []
    for config, batch, seq_len, checkpointed in FSDP2_ROWS:
        kind, _ = memory_models.CONFIGS[config]
        checkpoint = (memory_models.LAYER_TYPES[kind],) if checkpointed else ()
        trace = record_memory_trace.record_plain(config, batch=1, seq_len=seq_len)
        fsdp_peak = fsdp2(config, batch, seq_len, world, checkpoint)["per_rank_peak"]
        fsdp = fsdp_peak["Total"]
        total, categories = replay_rank_peak(zero3, trace, world, batch, seq_len, checkpoint, work)
        term = categories["param_shard"] + (categories["grad_shard"] if fsdp_peak.get("Sharded Grad", 0) == 0 else 0)
        row = dict(model_name=config, batch=batch, seq_len=seq_len, checkpoint=",".join(checkpoint) or "-", fsdp2=fsdp,
                   zero3=total, by_design=term, error=(total - fsdp) / fsdp, error_by_design=(total - term - fsdp) / fsdp)
        rows.append(row)
        log(f"| {config} | {batch} x {seq_len:,} | {row['checkpoint']} | {fsdp / GB:.2f} | {total / GB:.2f} | "
            f"{100 * row['error']:+.1f} % | {term / GB:.2f} | {100 * row['error_by_design']:+.1f} % |")
    return rows


def format_row(row):
    return (f"| {row['model_name']} | {row['batch']} x {row['seq_len']:,} | {row['checkpoint']} | "
            f"{row['model'] / GB:.2f} | {row['memtracker'] / GB:.2f} | {100 * row['error']:+.2f} % | "
            f"{row['per_op'] / GB:.2f} | {row['snapshots'] / GB:.2f} | "
            f"{row['at_total_peak']['activation'] / GB:.1f} + {row['at_total_peak']['temp'] / GB:.1f} |")


TABLE_HEADER = ("| model | micro-batch x tokens | checkpointed | replay model (GB) | MemTracker activations (GB) | error "
                "| MemTracker ACT+TEMP, gradients in TEMP (GB) | max over MemTracker's snapshots (GB) "
                "| ACT + TEMP at MemTracker's peak (GB) |\n|---|---|---|---|---|---|---|---|---|")


def main(argv=None):
    record_memory_trace.require_torch("memory_oracle.py")
    parser = argparse.ArgumentParser(description="torch's memory trackers as an oracle for the replay's activations")
    parser.add_argument("model", nargs="?", help="a config of tools/recorders/memory_models.py")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq-len", type=int)
    parser.add_argument("--checkpoint", action="append", default=[], metavar="TYPE",
                        help="checkpoint every outermost module of this type or name (repeatable)")
    parser.add_argument("--attention", choices=("sdpa", "eager"), default="sdpa")
    parser.add_argument("--compare", action="store_true",
                        help="also record the model once (batch 1) and give the reference model's peak")
    parser.add_argument("--fsdp2", action="store_true", help="run FSDP2 under FSDPMemTracker instead")
    parser.add_argument("--world", type=int, default=8)
    parser.add_argument("--table", action="store_true", help="print traces/README.md's table (minutes)")
    parser.add_argument("--fsdp2-table", action="store_true",
                        help="print the per-rank table against FSDP2's tracker at --world ranks (needs --zero3)")
    parser.add_argument("--zero3", help="with --table: the zero3 binary, whose replay gives the replay column "
                                        "(else the reference model of tools/recorders/activation_model.py)")
    args = parser.parse_args(argv)
    if args.fsdp2_table:
        if not args.zero3:
            parser.error("--fsdp2-table needs --zero3 BIN")
        rows = fsdp2_table(args.zero3, args.world, log=lambda line: print(line, flush=True))
        print(f"worst difference without the by-design term {100 * max(abs(r['error_by_design']) for r in rows):.1f} %")
        return 0
    if args.table:
        print(TABLE_HEADER.replace("replay model", "zero3 replay" if args.zero3 else "replay model"))
        rows = table(log=lambda line: print(line, flush=True), zero3=args.zero3)
        worst = max(abs(r["error"]) for r in rows)
        print(f"worst error {100 * worst:.1f} %")
        return 0
    if not args.model:
        parser.error("give a model (or --table)")
    seq_len = args.seq_len or memory_models.CONFIGS[args.model][1]["context"]
    if args.fsdp2:
        result = fsdp2(args.model, args.batch, seq_len, args.world, args.checkpoint, args.attention)
    else:
        result = plain_oracle(args.model, args.batch, seq_len, args.checkpoint, args.attention)
        if args.compare:
            trace = record_memory_trace.record_plain(args.model, batch=1, attention=args.attention)
            result["replay_model"] = activation_model.activation_peak(trace, args.batch, seq_len, args.checkpoint)
            result["error"] = (result["replay_model"] - result["activation_peak"]) / result["activation_peak"]
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
