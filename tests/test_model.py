import copy

import torch
from torch.nn import functional as F

from dlrm_study.data import SyntheticData
from dlrm_study.model.interaction import DotInteraction
from dlrm_study.model.tables import ReferenceSparseArch, TableSpec
from dlrm_study.train import build, train_step


def dlrm_interaction(x: torch.Tensor, ly: list[torch.Tensor]) -> torch.Tensor:
    """facebookresearch/dlrm's interact_features (dot, no self-interaction), verbatim in spirit."""
    batch_size, d = x.shape
    t = torch.cat([x, *ly], dim=1).view((batch_size, -1, d))
    z = torch.bmm(t, torch.transpose(t, 1, 2))
    _, ni, nj = z.shape
    li = torch.tensor([i for i in range(ni) for j in range(i)])
    lj = torch.tensor([j for i in range(nj) for j in range(i)])
    return torch.cat([x, z[:, li, lj]], dim=1)


def test_dot_interaction_matches_dlrm():
    x, pooled = torch.randn(5, 4), torch.randn(5, 3, 4)
    ours = DotInteraction(4)(x, pooled)
    assert ours.shape == (5, 4 + 6)
    torch.testing.assert_close(ours, dlrm_interaction(x, list(pooled.unbind(1))), rtol=0, atol=0)


def test_reference_arch_sums_bags_and_makes_sparse_gradients():
    arch = ReferenceSparseArch(TableSpec((10, 20), 3, lr=0.1), generator=torch.Generator().manual_seed(0))
    ids = [torch.tensor([1, 1, 4, 2]), torch.tensor([7, 19, 0])]
    offsets = [torch.tensor([0, 2]), torch.tensor([0, 1])]
    pooled = arch(ids, offsets)
    w0, w1 = arch.tables()
    assert pooled.shape == (2, 2, 3)
    torch.testing.assert_close(pooled[0, 0], 2 * w0[1])  # a repeated id counts twice
    torch.testing.assert_close(pooled[1, 1], w1[19] + w1[0])
    pooled.sum().backward()
    assert arch.bags[0].weight.grad.is_sparse


def test_initialisation_follows_dlrm(tiny):
    run = build(tiny)
    for rows, table in zip(tiny.model.table_rows, run.model.sparse_arch.tables(), strict=True):
        assert table.abs().max() <= (1 / rows) ** 0.5
    layer = run.model.bottom_mlp[0]
    fan_out, fan_in = layer.weight.shape
    assert abs(layer.weight.std().item() - (2 / (fan_in + fan_out)) ** 0.5) < 0.05


def test_reference_step_equals_one_sgd_over_all_parameters(small):
    """Our split (dense SGD + the arch's sparse SGD) is dlrm's single torch.optim.SGD."""
    ours = build(small)
    model = copy.deepcopy(ours.model)
    dlrm_sgd = torch.optim.SGD(model.parameters(), lr=small.train.learning_rate)
    data = SyntheticData(small)
    for i in range(5):
        batch = data.batch(i)
        train_step(ours, batch)
        loss = F.binary_cross_entropy_with_logits(model(batch), batch.labels)
        dlrm_sgd.zero_grad()
        loss.backward()
        dlrm_sgd.step()
    for (name, a), b in zip(ours.model.state_dict().items(), model.state_dict().values(), strict=True):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
