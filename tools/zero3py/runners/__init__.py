"""Differential runners (issue 29): the same case trained by a framework (torch DDP, DeepSpeed
ZeRO-3, FSDP2) on W gloo ranks and by an unsharded reference in one process. PROTOCOL.md says what
a runner reads and answers; __main__ is the runner, pool and rank its processes, case the case
directory, training the shared training code, targets the frameworks, repro the standalone
reproduction scripts of a finding."""
