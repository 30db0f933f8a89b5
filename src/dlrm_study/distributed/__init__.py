"""Hybrid parallelism's runtime over torch.distributed (and torchrec), launched by torchrun.

- `launch`: the process group from torchrun's environment, timeouts, and the watchdog that
  turns a dead or hung rank into a prompt non-zero exit naming it.
- `hybrid`: the project's own route: tables sharded table-wise, pooled embeddings exchanged
  by all-to-all (overlapped with the bottom MLP), dense parameters data-parallel (DDP).
- `torchrec_route`: the same split done by torchrec's DistributedModelParallel.
- `run`: joining the group and building a rank's share (from a checkpoint too), its batches, and
  the single-process checkpoint it saves; `remote`: tables on parameter-server processes
  (torch.distributed.rpc); `processes`: launching `dlrm-study` on several processes.

Timing these runs is `measure.distributed`'s; the scaling model is `perfmodel.scaling`.
"""
