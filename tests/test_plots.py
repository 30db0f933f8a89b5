import numpy as np
import pandas as pd

from dlrm_study import config, plots, results


def test_convergence_draws_each_loss_curve_in_step_order():
    """Records arrive in timestamp order, which ties scramble: a curve must still run left to right."""
    steps = [300, 100, 200, 50]
    losses = pd.DataFrame({"kind": "loss", "variant": "reference", "step": steps, "loss": [0.5, 0.6, 0.55, 0.7]})
    fields = {"kind": "eval", "step": 300, "eval_auc": 0.8}
    evals = pd.DataFrame([results.record("convergence", fields, config.preset("tiny"), variant="reference")])
    fig = plots.convergence(pd.concat([losses, evals], ignore_index=True), "t")
    (line,) = fig.axes[0].get_lines()
    assert list(line.get_xdata()) == sorted(steps)
    assert np.all(np.diff(line.get_ydata()) < 0)  # the losses went down with the steps
