import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """The losses issue 5 names that are not cross-entropy, at odd sizes: KL divergence (batchmean,
    with zero targets, whose terms are 0 by convention), cosine similarity (a zero row, whose norm
    the epsilon clamps), hinge, triplet margin, MSE and Huber."""

    def __init__(self, margin):
        super().__init__()
        self.triplet = nn.TripletMarginLoss(margin=margin)

    def forward(self, logp, q, a, b, y):
        return (F.kl_div(logp, q, reduction="batchmean"), 1 - F.cosine_similarity(a, b, dim=1),
                torch.mean(torch.clamp(1 - a * y, min=0)), self.triplet(a, b, a.flip(0)),
                F.mse_loss(a, b) + F.huber_loss(a, b, delta=0.5))


def get_inputs():
    q = torch.rand(37, 53).softmax(-1)
    q[3, :7] = 0
    a, b = torch.randn(33, 37), torch.randn(33, 37)
    b[5] = 0
    return [torch.randn(37, 53).log_softmax(-1), q, a, b, torch.randint(0, 2, (33, 37)).float() * 2 - 1]


def get_init_inputs():
    return [1.0]
