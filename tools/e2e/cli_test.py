#!/usr/bin/env python3
"""The CLI as a user meets it: exit codes and what each command prints, on good input and on bad
(a bad flag, model, spec, config, checkpoint or case file is exit 1 naming the file, the JSON path
and what was expected, and leaves nothing half-written). One table of cases; every case says the
exit code it expects and the text that must appear in stdout + stderr.

    tools/e2e/cli_test.py build/tools/zero3
"""
import json
import os
import subprocess
import sys
import tempfile


def write(path, value):
    with open(path, "w") as out:
        out.write(value if isinstance(value, str) else json.dumps(value))
    return path


# What --checkpoint-activations names in each model of the lever cases.
LEVER_MODULES = {"gpt-tiny": "transformer_block", "moe-tiny": "layers.2", "zero-sized": "layers.0,layers.1"}


def levers_lower_memory(folder):
    """Checkpointing lowers the activation peak; offload leaves no optimizer state on the device."""
    paths = [os.path.join(folder, name) for name in ("levers3gpt-tiny.json", "plain3gpt-tiny.json")]
    if not all(os.path.exists(path) for path in paths):
        return ["the lever reports were not written"]
    levers, plain = (json.load(open(path))["memory_per_rank"][0] for path in paths)
    problems = []
    if not levers["activation"] < plain["activation"]:
        problems.append(f"activation peak {levers['activation']} with checkpointing, {plain['activation']} without")
    if levers["optimizer_state"] != 0 or levers["host_optimizer_state"] != plain["optimizer_state"]:
        problems.append(f"optimizer state on the device {levers['optimizer_state']}, on the host "
                        f"{levers['host_optimizer_state']}, without offload {plain['optimizer_state']}")
    return problems


def cases(folder):
    spec = write(os.path.join(folder, "bad_spec.json"), {"zero3_model_spec": 1, "layers": []})
    broken_json = write(os.path.join(folder, "broken.json"), '{"zero3_model_spec": 1,')
    config = write(os.path.join(folder, "bad_config.json"), {"train_micro_batch_size_per_gpu": "four"})
    case_file = write(os.path.join(folder, "bad_case.json"), {"zero3_trace": 1, "model_spec": {}, "run": {"world": 0}})
    checkpoint = os.path.join(folder, "ck")
    consolidated = os.path.join(folder, "full")
    missing = os.path.join(folder, "missing")
    models = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "traces", "models")
    leaf = write(os.path.join(folder, "leaf.json"), {"zero_optimization": {"zero3_leaf_modules": ["moe"]}})
    # Persistence 0: every parameter sharded, so hpZ's backward gathers from its secondary copy.
    groups = {model: write(os.path.join(folder, f"groups-{model}.json"), {"zero_optimization": dict(
        {"stage3_param_persistence_threshold": 0}, **({"zero3_leaf_modules": ["moe"]} if model == "moe-tiny" else {}))})
        for model in ("gpt-tiny", "moe-tiny", "zero-sized")}
    llama = os.path.join(models, "llama-2-7b.json")
    mixtral = os.path.join(models, "mixtral-8x7b.json")
    fp16 = write(os.path.join(folder, "fp16.json"), {"fp16": {"enabled": True}})
    hf_auto = write(os.path.join(folder, "hf_auto.json"), {
        "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
        "bf16": {"enabled": "auto"}, "optimizer": {"type": "AdamW", "params": {"lr": "auto"}},
        "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": "auto"}},
        "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                              "stage3_param_persistence_threshold": "auto",
                              "offload_param": {"device": "cpu", "pin_memory": True}}})
    typo = write(os.path.join(folder, "typo.json"), {"zero_optimization": {"stage3_prefetch_bucket_sise": 5}})
    batch_mismatch = write(os.path.join(folder, "batch.json"), {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4,
                                                              "gradient_accumulation_steps": 8})
    nvme = write(os.path.join(folder, "nvme.json"), {"zero_optimization": {"offload_optimizer": {"device": "nvme"}}})
    no_bf16 = write(os.path.join(folder, "no_bf16.json"), {"train_micro_batch_size_per_gpu": 2,
                                                           "gradient_accumulation_steps": 8})
    model_spec = write(os.path.join(folder, "spec.json"), {"zero3_model_spec": 1, "kind": "gpt", "vocab": 64,
                                                           "context": 16, "layers": 2, "heads": 2, "width": 32})
    return [
        # (name, arguments, exit code, texts that must appear, paths that must not exist afterwards)
        ("help lists the commands", ["--help"], 0, ["train", "fuzz", "replay", "bench", "consolidate"], []),
        ("an unknown command is a usage error naming it", ["no-such-command"], 1,
         ["unknown command 'no-such-command'", "train"], []),
        ("train --help teaches the device flag", ["train", "--help"], 0, ["--device", "opaque", "--check"], []),
        ("a step count out of range is a usage error", ["train", "--steps", "0"], 1, ["--steps"], []),
        ("an unknown model names the built-in ones", ["train", "--model", "no-such-model", "--steps", "1"], 1,
         ["'no-such-model'", "gpt-tiny"], []),
        ("a bad model spec names the file and the JSON path", ["train", "--model", spec, "--steps", "1"], 1,
         [spec + ": at /kind"], []),
        ("a spec that is not JSON names the file", ["train", "--model", broken_json, "--steps", "1"], 1,
         [broken_json], []),
        ("a bad config names the file, the path and the expectation", ["train", "--config", config, "--steps", "1"],
         1, [config + ": at /train_micro_batch_size_per_gpu: expected an integer"], []),
        ("the reference trains and prints its seed, replay command and hash",
         ["train", "--backend", "ref", "--steps", "2"], 0, ["final parameter hash", "zero3 train --backend ref"], []),
        ("simulated ZeRO-3 with --check equals DDP and the single-process oracle",
         ["train", "--backend", "sim", "--ranks", "3", "--steps", "2", "--check", "--device", "opaque"], 0,
         ["bitwise equal", "single-process reference", "host syncs per step: 2"], []),
        *[(f"ZeRO stage {stage} on {model} equals DDP bit for bit",
           ["train", "--backend", "sim", "--ranks", "4", "--steps", "2", "--check", "--zero", str(stage), "--model", model]
           + (["--config", leaf] if model == "moe-tiny" else []), 0,
           [f"check: ZeRO-{stage} vs DDP: bitwise equal", "model state per rank:"], [])
          for stage in (1, 2) for model in ("gpt-tiny", "moe-tiny", "zero-sized")],
        *[(f"ZeRO stage {stage} on {model} with checkpointing and offload equals DDP bit for bit",
           ["train", "--backend", "sim", "--ranks", "4", "--steps", "2", "--check", "--zero", str(stage), "--model", model,
            "--checkpoint-activations", LEVER_MODULES[model], "--offload-optimizer", "cpu",
            "--report", os.path.join(folder, f"levers{stage}{model}.json")]
           + (["--offload-param", "cpu"] if stage == 3 else []) + (["--config", leaf] if model == "moe-tiny" else []), 0,
           [f"check: ZeRO-{stage} vs DDP: bitwise equal", "offloaded to host memory", "bytes device->host"], [])
          for stage in (1, 2, 3) for model in ("gpt-tiny", "moe-tiny", "zero-sized")],
        # Hierarchical sharding: HSDP equals DDP over its own reduction tree, hpZ equals flat DDP.
        *[(f"{scheme} G={group} on {model} at W={world} equals its DDP oracle bit for bit",
           ["train", "--backend", "sim", "--ranks", str(world), "--steps", "2", "--check", "--model", model,
            "--config", groups[model], flag, str(group)], 0,
           ["bitwise equal (losses, grad norms"]
           + ([f"HSDP: sharded over blocks of {group} ranks"] if scheme == "HSDP" else [])
           + ([f"a secondary copy over blocks of {group} ranks"] if scheme == "hpZ" and group > 1 else []), [])
          for scheme, flag in (("HSDP", "--shard-group"), ("hpZ", "--hpz"))
          for model in ("gpt-tiny", "moe-tiny", "zero-sized") for world in (4, 8) for group in (1, 2, world)],
        ("a shard group that does not divide the world is refused naming the key and the world size",
         ["train", "--backend", "sim", "--ranks", "4", "--steps", "1", "--shard-group", "3"], 1,
         ["/zero_optimization/mics_shard_size = 3 does not divide the world size 4"], []),
        ("an hpZ group larger than the world is refused", ["train", "--backend", "sim", "--ranks", "4", "--hpz", "8"], 1,
         ["/zero_optimization/zero_hpz_partition_size = 8 exceeds the world size 4"], []),
        ("groups below stage 3 are refused", ["train", "--backend", "sim", "--ranks", "4", "--zero", "2",
                                              "--shard-group", "2"], 1, ["needs stage 3"], []),
        ("HSDP and hpZ together are refused", ["train", "--backend", "sim", "--ranks", "4", "--shard-group", "2",
                                               "--hpz", "2"], 1, ["choose one"], []),
        ("the same run without the levers, for their memory",
         ["train", "--backend", "sim", "--ranks", "4", "--steps", "2", "--zero", "3",
          "--report", os.path.join(folder, "plain3gpt-tiny.json")], 0, [], []),
        ("checkpointing a module the model does not have names it and the model's types",
         ["train", "--backend", "sim", "--ranks", "2", "--steps", "1", "--checkpoint-activations", "block"], 1,
         ["activation_checkpointing.zero3_modules (--checkpoint-activations): 'block' is neither", "transformer_block"],
         []),
        ("offload_param below stage 3 is refused, as DeepSpeed refuses it",
         ["train", "--backend", "sim", "--ranks", "2", "--steps", "1", "--zero", "2", "--offload-param", "cpu"], 1,
         ['/zero_optimization/offload_param/device: "cpu" needs stage 3'], []),
        ("nvme offload is refused naming the key", ["train", "--steps", "1", "--config", nvme], 1,
         [nvme + ": at /zero_optimization/offload_optimizer/device", "not built"], []),
        ("--device is refused on the cuda backend", ["train", "--backend", "cuda", "--device", "opaque"], 1,
         ["--device opaque is for the ref, sim and mpi backends"], []),
        ("--gpus on a backend without GPUs is refused", ["train", "--backend", "sim", "--gpus", "2"], 1,
         ["--gpus picks GPUs for --backend cuda, not for --backend sim"], []),
        ("train --help teaches the cuda backend's launch", ["train", "--help"], 0, ["--gpus", "LOCAL_RANK"], []),
        *([] if os.path.exists("/dev/nvidia0") else [
            ("--backend cuda without a GPU is exit 4 with CUDA's reason, and no report of success",
             ["train", "--backend", "cuda", "--steps", "1", "--report", os.path.join(folder, "cuda.json")], 4,
             ["--backend cuda: "], []),
            ("bench comm --backend cuda without a GPU is exit 4 with the reason",
             ["bench", "comm", "--backend", "cuda", "--describe"], 4, ["--backend cuda: "], []),
        ]),
        ("--record on a backend that records nothing is refused, and writes nothing",
         ["train", "--backend", "ref", "--steps", "1", "--record", os.path.join(folder, "trace.json")], 1,
         ["--record records the simulator's events: it needs --backend sim, not ref"], [os.path.join(folder, "trace.json")]),
        ("--faults on the reference is refused, not ignored", ["train", "--backend", "ref", "--steps", "1", "--faults", "crash"],
         1, ["--faults are injected by the simulator (and crash by the mpi backend), not by --backend ref"], []),
        ("train --help teaches the mpi backend", ["train", "--help"], 0, ["mpirun -np W", "--collective-timeout"], []),
        ("a save at a step past the run is refused before training",
         ["train", "--backend", "sim", "--ranks", "2", "--steps", "2", "--save-checkpoint", checkpoint,
          "--save-at", "5"], 1, ["--save-at"], [checkpoint]),
        ("a checkpoint is saved", ["train", "--backend", "sim", "--ranks", "2", "--steps", "2",
                                   "--save-checkpoint", checkpoint], 0, ["final parameter hash"], []),
        ("resuming at another world size says the global batch changes",
         ["train", "--backend", "sim", "--ranks", "3", "--steps", "3", "--load-checkpoint", checkpoint], 0,
         ["saved at world size 2, on 3 ranks: the global batch changes from 8 to 12 examples per step",
          "resumed at step 2 from " + checkpoint + " (saved at world size 2)\nstep     3/3"], []),
        ("--save-every keeps the newest --keep-last checkpoints and a latest pointer",
         ["train", "--backend", "sim", "--ranks", "2", "--steps", "5", "--save-checkpoint", os.path.join(folder, "series"),
          "--save-every", "2", "--keep-last", "2"], 0, ["checkpoints every 2 steps", "latest names "],
         [os.path.join(folder, "series", "step_00000002")]),
        ("--load-checkpoint of a series resumes from the one latest names",
         ["train", "--backend", "sim", "--ranks", "3", "--steps", "6", "--load-checkpoint", os.path.join(folder, "series")],
         0, ["resumed at step 5 from ", "step     6/6"], []),
        ("the report writes the lr as the float's shortest decimal",
         ["train", "--backend", "ref", "--steps", "1", "--report", os.path.join(folder, "lr.json")], 0, [], []),
        ("--keep-last without --save-every is a usage error", ["train", "--steps", "1", "--keep-last", "2"], 1,
         ["--keep-last requires --save-every"], []),
        ("consolidate writes a world-1 checkpoint", ["consolidate", checkpoint, consolidated], 0, [], []),
        ("the reference resumes from the consolidated checkpoint",
         ["train", "--backend", "ref", "--steps", "3", "--load-checkpoint", consolidated], 0,
         ["final parameter hash"], []),
        ("consolidate writes safetensors with GPT-2's names",
         ["consolidate", checkpoint, os.path.join(folder, "a.safetensors"), "--format", "safetensors", "--names", "hf-gpt2"],
         0, ["28 tensors", "--init-from"], []),
        ("training starts from them (lr 0: the weights stay) and saves",
         ["train", "--backend", "sim", "--ranks", "3", "--steps", "1", "--lr", "0", "--init-from",
          os.path.join(folder, "a.safetensors"), "--names", "hf-gpt2", "--save-checkpoint", os.path.join(folder, "ck2")],
         0, ["final parameter hash"], []),
        ("which consolidate writes back (byte-identical: checked below)",
         ["consolidate", os.path.join(folder, "ck2"), os.path.join(folder, "b.safetensors"), "--format", "safetensors",
          "--names", "hf-gpt2"], 0, [], []),
        ("a malformed safetensors file is exit 1 naming it, and no checkpoint is written",
         ["train", "--backend", "ref", "--steps", "1", "--init-from", broken_json, "--save-checkpoint",
          os.path.join(folder, "ck3")], 1, [broken_json + ": the header length"], [os.path.join(folder, "ck3")]),
        ("GPT-2 names on a sequential model are refused",
         ["train", "--model", "mlp-tiny", "--steps", "1", "--init-from", os.path.join(folder, "a.safetensors"),
          "--names", "hf-gpt2"], 1, ["has no GPT-2 name"], []),
        ("consolidate to a name ending in .safetensors writes that format without --format",
         ["consolidate", checkpoint, os.path.join(folder, "c.safetensors")], 0,
         ["format: safetensors (from the output's name", "tensors, f32 master weights"], []),
        ("consolidate of a missing folder names it and writes nothing",
         ["consolidate", missing, os.path.join(folder, "never")], 1, [missing], [os.path.join(folder, "never")]),
        ("the fault campaign over generated cases prints outcomes per fault site and a replay command",
         ["fuzz", "--fault-campaign", "--runs", "40", "--seed", "3"], 0,
         ["| site | faults fired | runs | correct | specific error | hang | silent corruption | unexplained |",
          "| **all runs** |", "40 generated cases", "replay: zero3 fuzz faults --runs 40 --seed 3"], []),
        ("the fixed-model campaign (--model) prints the first reliability table",
         ["fuzz", "--fault-campaign", "--model", "gpt-tiny", "--runs", "6"], 0,
         ["| hang | 0 |", "| silent corruption | 0 |", "fault seeds 1..6"], []),
        ("inspect --dump-logits writes a gpt's logits", ["inspect", "gpt-tiny", "--dump-logits",
                                                          os.path.join(folder, "logits.safetensors")], 0,
         ["logits [4,16,64]"], []),
        ("a rank-divergent MoE's mismatch (exit 3) suggests the leaf-module remedy",
         ["train", "--backend", "sim", "--ranks", "4", "--model", "moe-tiny", "--steps", "1"], 3,
         ["collective mismatch at #", "hint: when the data decides which modules a rank runs", "zero3_leaf_modules"], []),
        ("inspect lists the built-in models", ["inspect", "--list"], 0, ["gpt-tiny", "moe-tiny"], []),
        ("inspect prints a parameter table", ["inspect", "gpt2-124m"], 0, ["148 parameters, 124439808 elements"], []),
        ("inspect of an unknown model is exit 1", ["inspect", "nothing"], 1, ["'nothing'"], []),
        ("fuzz --explain says what the table's columns and the properties mean", ["fuzz", "--explain"], 0,
         ["shrinks A/T", "smaller failing cases accepted out of T tried", "device-agreement", "replay-memory"], []),
        ("fuzz prints its seed and a replay command",
         ["fuzz", "--cases", "3", "--seed", "5", "--property", "equivalence", "--out", folder], 0,
         ["seed=5", "replay: zero3 fuzz --cases 3 --seed 5", "passed"], []),
        ("the injection table credits the property that caught it",
         ["fuzz", "--injection-table", "--inject", "gas-scale-twice", "--seeds", "1,2", "--cases", "20"], 0,
         ["| gas-scale-twice | equivalence | 2, 4 |", "produced by: zero3 fuzz --injection-table --seeds 1,2"], []),
        ("the injection table fails when an injection escapes the case budget",
         ["fuzz", "--injection-table", "--inject", "placeholder-empty", "--seeds", "1", "--cases", "5"], 2,
         ["NOT CAUGHT", "not caught for every seed: placeholder-empty"], []),
        ("placeholder rates: the error policy gives the specific error wherever the trap is reached",
         ["fuzz", "--placeholder-rates", "--cases", "40", "--seed", "1", "--max-ranks", "8"], 0,
         ["| error | 40 |", "| empty | 40 |", "produced by: zero3 fuzz --placeholder-rates --cases 40"], []),
        ("fuzz of an unknown property names the known ones", ["fuzz", "--property", "nope"], 1,
         ["unknown property 'nope'", "equivalence"], []),
        ("fuzz --replay of a missing file names it", ["fuzz", "--replay", missing], 1, [missing], []),
        ("fuzz's modes are subcommands as well: fuzz replay FILE is --replay FILE", ["fuzz", "replay", missing], 1,
         [missing], []),
        ("fuzz faults is --fault-campaign, fuzz's options after it", ["fuzz", "faults", "--runs", "2", "--model",
                                                                       "gpt-tiny"], 0,
         ["Fault campaign: gpt-tiny, W=4", "2 fault seeds"], []),
        ("fuzz target needs the framework's name", ["fuzz", "target"], 1, ["name is required"], []),
        ("fuzz faults honours --seed: it seeds the model and starts the fault seeds, with a replay command",
         ["fuzz", "faults", "--model", "gpt-tiny", "--runs", "2", "--seed", "41"], 0,
         ["model and data seed 41, fault seeds 41..42",
          "replay: zero3 fuzz faults --model gpt-tiny --runs 2 --seed 41"], []),
        ("fuzz faults without --seed draws one and prints it", ["fuzz", "faults", "--runs", "3"], 0,
         ["generated cases", "replay: zero3 fuzz faults --runs 3 --seed "], []),
        ("fuzz --replay of a malformed case file names the JSON path", ["fuzz", "--replay", case_file], 1,
         [case_file + ": at /"], []),
        ("fuzz --target with a runner that does not speak the protocol is a broken runner (exit 4), not a finding",
         ["fuzz", "--target", "mine", "--target-runner", "echo hello there", "--cases", "2", "--out", folder], 4,
         ["the runner 'mine'", "not JSON: hello there"], []),
        ("fuzz --target with a runner that dies after its hello names what it printed",
         ["fuzz", "--target", "mine", "--cases", "2", "--out", folder, "--target-runner",
          "echo '{\"protocol\": 1, \"hello\": \"zero3-runner\"}'; echo gone >&2"], 4,
         ["the runner 'mine'", "gone"], []),
        ("fuzz --target-runner without --target is refused", ["fuzz", "--target-runner", "true"], 1,
         ["--target-runner, --target-hsdp, --target-transformer, --target-levers, --target-bf16, --target-memory, --report and --upstream need --target NAME"], []),
        ("bench step reports both ratios", ["bench", "step", "--steps", "2", "--rounds", "1", "--ranks", "2"], 0,
         ["ratio_zero3_over_ddp_exact", "ratio_zero3_over_ddp_bucketed"], []),
        ("bench step --help teaches both backends", ["bench", "step", "--help"], 0,
         ["--backend", "--warmup", "GEMMs alone", "--ddp-bucket-mib"], []),
        *([] if os.path.exists("/dev/nvidia0") else [
            ("bench step --backend cuda without a GPU is exit 4 with CUDA's reason, and writes no report",
             ["bench", "step", "--backend", "cuda", "--report", os.path.join(folder, "step.json")], 4,
             ["--backend cuda: "], [os.path.join(folder, "step.json")]),
        ]),
        ("bench step --backend cuda refuses an unknown model before asking for a GPU (exit 1, not 4)",
         ["bench", "step", "--backend", "cuda", "--model", "no-such-model"], 1, ["'no-such-model'", "gpt-tiny"], []),
        ("bench step --backend cuda refuses a simulator flag, naming it",
         ["bench", "step", "--backend", "cuda", "--ranks", "2"], 1,
         ["--ranks is a flag of bench step --backend sim, not of --backend cuda"], []),
        ("bench step on the simulator refuses a cuda flag, naming it", ["bench", "step", "--gpus", "1"], 1,
         ["--gpus is a flag of bench step --backend cuda, not of --backend sim"], []),
        ("bench comm on the simulator needs a world size", ["bench", "comm", "--max-bytes", "4096"], 1,
         ["--ranks is required with --backend sim"], []),
        ("bench comm checks its data", ["bench", "comm", "--ranks", "2", "--max-bytes", "4096"], 0,
         ["all_gather", "reduce_scatter", "#wrong"], []),
        ("replay of a missing trace names it", ["replay", missing], 1, [missing], []),
        ("replay without --hardware judges the peak on an H100 and says it was assumed",
         ["replay", os.path.join(models, "gpt2-124m.json"), "--ranks", "8"], 0,
         ["\nfits: ", "on H100 SXM5 80GB (assumed: pass --hardware h100|h200|a100|FILE); ", " to spare after a 5.0 GB "
          "reserve", "\nlargest micro-batch that fits: ", "\nthroughput: ", " tokens/s over 8 ranks", "MFU "], []),
        ("replay says when the peak does NOT fit the chosen device",
         ["replay", os.path.join(models, "gpt3-175b.json"), "--ranks", "8", "--hardware", "h100"], 0,
         ["\ndoes NOT fit: ", " of 80 GB (", "%) on H100 SXM5 80GB; ", " over after a 5.0 GB reserve",
          "\nno micro-batch fits: not even 1 sequence per rank\n", "\nwould still not fit with:\n",
          "--offload-optimizer cpu (offload optimizer): peak "], []),
        ("replay rescales activations to --micro-batch and says where each setting came from",
         ["replay", llama, "--ranks", "64", "--hardware", "h100", "--micro-batch", "8"], 0,
         ["run: micro-batch 8 (--micro-batch) x seq_len 4096 (the trace's) = 32768 tokens", "activation 209.237 GB",
          "does NOT fit: 212.1 GB of 80 GB", "\nlargest micro-batch that fits: 2 ",
          "  --checkpoint-activations LlamaDecoderLayer (activation checkpointing): peak"], []),
        ("a config without a bf16 block keeps the trace's dtype, and its accumulation shows as micro-steps",
         ["replay", llama, "--ranks", "64", "--config", no_bf16], 0,
         ["micro-batch 2 (config train_micro_batch_size_per_gpu)", "8 micro-steps per step (config "
          "gradient_accumulation_steps); bf16 compute (the trace's dtype)", "18.00 bytes per shard element"], []),
        ("fp16 is refused naming the key, never computed as f32", ["replay", llama, "--config", fp16], 1,
         [fp16 + ": at /fp16/enabled: expected false (fp16 training", "needs no loss scaling"], []),
        ("Hugging Face's \"auto\" is accepted and printed as resolved; typos and DeepSpeed keys get advice",
         ["replay", llama, "--ranks", "8", "--config", hf_auto], 0,
         ["micro-batch 1 (\"auto\": the trace's)", "config \"auto\" resolved: train_micro_batch_size_per_gpu=1",
          "bf16/enabled=true", "zero_optimization/stage3_prefetch_bucket_size=15099494",
          "zero_optimization/stage3_param_persistence_threshold=40960", "zero_optimization/reduce_bucket_size=16777216",
          "zero3 does not use 2 DeepSpeed keys of this config", "/scheduler, /zero_optimization/offload_param/pin_memory"],
         []),
        ("a typo in zero_optimization is refused as DeepSpeed refuses it, with the key meant",
         ["replay", llama, "--config", typo], 1,
         [typo + ": at /zero_optimization/stage3_prefetch_bucket_sise: not a DeepSpeed key: did you mean "
          "stage3_prefetch_bucket_size?", "DeepSpeed 0.19.8 refuses"], []),
        ("train_batch_size against micro-batch x accumulation x world is checked as DeepSpeed asserts it",
         ["replay", llama, "--ranks", "8", "--config", batch_mismatch], 1,
         [batch_mismatch + " with the flags: at /train_batch_size: 64 is not train_micro_batch_size_per_gpu x "
          "gradient_accumulation_steps x world size = 4 x 8 x 8 = 256"], []),
        ("train prints what \"auto\" became", ["train", "--backend", "ref", "--steps", "1", "--config", hf_auto], 0,
         ["\"auto\" in " + hf_auto + " resolved from flags and defaults: train_micro_batch_size_per_gpu=4"], []),
        ("a trace that does not say its batch is not rescaled silently",
         ["replay", mixtral, "--micro-batch", "8"], 1,
         [mixtral + ": at /batch: the trace does not say the batch and sequence length", "record_torch_trace.py"], []),
        ("an hpZ block spanning nodes is refused naming the key, the value, the world and the node",
         ["replay", os.path.join(models, "gpt2-124m.json"), "--ranks", "32", "--hardware", "h100", "--hpz", "16"], 1,
         ["/zero_optimization/zero_hpz_partition_size = 16 at the world size 32", "gpus_per_node 8",
          "backward's all-gathers run inside a node"], []),
        ("an hpZ block that does not divide a node spans nodes too",
         ["replay", os.path.join(models, "gpt2-124m.json"), "--ranks", "24", "--hpz", "3"], 1,
         ["/zero_optimization/zero_hpz_partition_size = 3 at the world size 24", "gpus_per_node 8"], []),
        ("HSDP blocks spanning nodes are legal, priced on the network, and the summary says the bytes by link",
         ["replay", os.path.join(models, "gpt2-124m.json"), "--ranks", "32", "--hardware", "h100",
          "--shard-group", "16"], 0,
         ["bytes per step by link (rank 0, last step): intra-node 0 B, inter-node ", "block inter-node ",
          "across blocks inter-node "], []),
        ("replay of a model spec says how to record a trace",
         ["replay", model_spec], 1, ["a zero3 trace, not a model spec: record one with `zero3 train --backend sim",
                                     "--record TRACE.json`"], []),
        ("demo trains ZeRO-3 and DDP and finds them equal", ["demo"], 0, ["bitwise", "final parameter hash"], []),
    ]


def main():
    if len(sys.argv) != 2:
        print("usage: cli_test.py PATH_TO_ZERO3", file=sys.stderr)
        return 1
    zero3 = os.path.abspath(sys.argv[1])
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        for name, arguments, code, texts, absent in cases(folder):
            result = subprocess.run([zero3] + arguments, capture_output=True, text=True, cwd=folder)
            output = result.stdout + result.stderr
            problems = []
            if result.returncode != code:
                problems.append(f"exit {result.returncode}, expected {code}")
            problems += [f"missing text {text!r}" for text in texts if text not in output]
            problems += [f"{path} exists" for path in absent if os.path.exists(path)]
            print(("ok   " if not problems else "FAIL ") + name)
            if problems:
                tail = "\n      ".join(output.strip().splitlines()[-6:])
                failures.append(f"{name} (zero3 {' '.join(arguments)}): {'; '.join(problems)}\n      {tail}")
        # The safetensors round trip (consolidate -> --init-from -> consolidate) is byte-identical.
        paths = [os.path.join(folder, name) for name in ("a.safetensors", "b.safetensors")]
        if all(os.path.exists(path) for path in paths):
            same = open(paths[0], "rb").read() == open(paths[1], "rb").read()
            print(("ok   " if same else "FAIL ") + "the safetensors round trip is byte-identical")
            if not same:
                failures.append("consolidate -> --init-from -> consolidate changed the safetensors bytes")
        # Under a launcher's variables for 2 processes, --backend sim says each would run the whole job.
        launched = subprocess.run([zero3, "train", "--backend", "sim", "--ranks", "2", "--steps", "1"],
                                  capture_output=True, text=True, cwd=folder,
                                  env=dict(os.environ, OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE="2",
                                           OMPI_COMM_WORLD_LOCAL_RANK="0"))
        said = launched.returncode == 0 and "2 processes would train 2 copies of the same run" in launched.stderr
        print(("ok   " if said else "FAIL ") + "--backend sim under mpirun's variables warns of duplicate jobs")
        if not said:
            failures.append(f"--backend sim under a launcher: exit {launched.returncode}\n{launched.stderr[-1500:]}")
        # --backend mpi outside a launcher: one rank, said. MPI's own allocations are never freed, so
        # leak checking is off here as under mpirun (tools/CMakeLists.txt, the MPI test).
        asan = os.environ.get("ASAN_OPTIONS", "")
        singleton = subprocess.run([zero3, "train", "--backend", "mpi", "--steps", "1"], capture_output=True, text=True,
                                   cwd=folder, env=dict(os.environ, ASAN_OPTIONS=(asan + ":" if asan else "") +
                                                        "detect_leaks=0"))
        said = singleton.returncode == 0 and ("without a launcher: this process is the job's only rank (world 1); "
                                              "start W ranks with mpirun -np W") in singleton.stderr
        print(("ok   " if said else "FAIL ") + "--backend mpi outside a launcher says it runs one rank and how to start W")
        if not said:
            failures.append(f"--backend mpi outside a launcher: exit {singleton.returncode}\n{singleton.stderr[-1500:]}")
        lever_problems = levers_lower_memory(folder)
        print(("ok   " if not lever_problems else "FAIL ") + "checkpointing lowers activations, offload empties the "
              "device's optimizer state")
        failures += [f"levers: {problem}" for problem in lever_problems]
        # lr 0.003, not 0.003000000026077032 (the f32's double).
        lr_report = os.path.join(folder, "lr.json")
        lr_text = open(lr_report).read() if os.path.exists(lr_report) else ""
        shortest = '"lr": 0.003,' in lr_text or '"lr": 0.003\n' in lr_text
        print(("ok   " if shortest else "FAIL ") + "the report's lr reads 0.003")
        if not shortest:
            failures.append("the report's lr is not 0.003: " + lr_text[lr_text.find('"lr"'):][:40])
        # The format was taken from the name: a file, not a checkpoint folder called c.safetensors.
        inferred = os.path.join(folder, "c.safetensors")
        print(("ok   " if os.path.isfile(inferred) else "FAIL ") + "consolidate wrote c.safetensors as a file")
        if not os.path.isfile(inferred):
            failures.append(f"{inferred} is not a file")
    for failure in failures:
        print("FAIL: " + failure)
    print("cli: " + ("ok" if not failures else f"{len(failures)} failures"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
