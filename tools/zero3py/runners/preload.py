"""Imported once by the server that forks a runner's ranks (pool.py): everything a rank needs, so a
rank starts in a fraction of a second instead of paying 7-15 s of imports on a busy 2-core machine
at every pool start (a fresh pool after every hang, crash or `fresh` request).

Importing starts no thread and opens no process group, so forking afterwards is safe. The target
comes from ZERO3_RUNNER_TARGET (the server's environment; pool.py sets it): DeepSpeed is imported
only for its runner.
"""
import gc
import logging
import os

import torch
import torch.distributed  # noqa: F401
import torch.distributed.fsdp  # noqa: F401
import torch.utils.checkpoint  # noqa: F401

# Imported lazily by the frameworks on the first initialize or fully_shard (DeepSpeed's optimizers
# pull in torch._dynamo and the inductor): seconds each in every fresh rank otherwise.
import torch._dynamo  # noqa: F401

import zero3py.runners.case  # noqa: F401
import zero3py.runners.memory  # noqa: F401
import zero3py.runners.rank  # noqa: F401
import zero3py.runners.targets  # noqa: F401
import zero3py.runners.training  # noqa: F401

if os.environ.get("ZERO3_RUNNER_TARGET") == "deepspeed":
    import deepspeed  # noqa: F401
    import deepspeed.runtime.zero.stage3  # noqa: F401
    import deepspeed.runtime.zero.stage_1_and_2  # noqa: F401
    from deepspeed.utils import logger
    logger.setLevel(logging.WARNING)

# What the imports built lives as long as the ranks: frozen, the collector of every forked rank
# skips it (and the pages stay shared between the ranks).
gc.collect()
gc.freeze()
