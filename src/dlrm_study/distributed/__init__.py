"""Hybrid parallelism over torch.distributed (and torchrec), launched by torchrun.

- `launch`: the process group from torchrun's environment, timeouts, and the watchdog that
  turns a dead or hung rank into a prompt non-zero exit naming it.
- `hybrid`: the project's own route: tables sharded table-wise, pooled embeddings exchanged
  by all-to-all (overlapped with the bottom MLP), dense parameters data-parallel (DDP).
- `torchrec_route`: the same split done by torchrec's DistributedModelParallel.
- `bench`: timed distributed steps with a per-phase breakdown; `perf_model`: the model
  calibrated on those records that projects scaling to many ranks; `remote`: tables on
  parameter-server processes (torch.distributed.rpc).
"""
