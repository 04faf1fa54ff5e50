# Decompositions that capture runs on the exported graph: core ATen plus softmax, norms, var,
# batch norm, losses, extremes with indices and gathers written out in ops that the planner
# fuses back into row groups (capture.export_graph).
import torch


def _moments(t, dims):
    """Mean and sum of squared deviations of t over dims (kept as size 1), and the count, in one
    pass over t: the sums of d = t - k and of d * d, where k is each row's first element.
    Shifting by a value of the data keeps sum(d * d) - sum(d)^2 / m from cancelling when the mean
    is large against the spread (the centred form needs a second pass, E[x^2] - E[x]^2 cancels)."""
    m = 1
    for d in dims:
        m *= t.shape[d]
    k = t[tuple(slice(0, 1) if d in dims else slice(None) for d in range(t.dim()))]
    d = t - k
    s1, s2 = d.sum(dims, keepdim=True), (d * d).sum(dims, keepdim=True)
    return k + s1 / m, (s2 - s1 * s1 / m).clamp_min(0.0), m


def _layer_norm(x, normalized_shape, weight, bias, eps):
    """native_layer_norm as one-pass moments and rsqrt: one row group (two passes)."""
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    mean, m2, m = _moments(x, dims)
    rstd = torch.rsqrt(m2 / m + eps)
    out = (x - mean) * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


def _group_norm(x, weight, bias, n, c, hw, group, eps):
    """native_group_norm the same way over x viewed as (n, group, c / group, hw), the affine
    parameters viewed to match, so that the whole norm stays one row group."""
    grouped = x.view(n, group, c // group, hw)
    mean, m2, m = _moments(grouped, [2, 3])
    rstd = torch.rsqrt(m2 / m + eps)
    out = (grouped - mean) * rstd
    if weight is not None:
        out = out * weight.view(1, group, c // group, 1)
    if bias is not None:
        out = out + bias.view(1, group, c // group, 1)
    return out.view(x.shape), mean.view(n, group), rstd.view(n, group)


def _channel_view(t, x):
    """A per-channel vector viewed to broadcast over x's (N, C, ...) layout."""
    return t.view([1, -1] + [1] * (x.dim() - 2))


# Below this many channels, statistics over (N, spatial) are taken in two steps (see _channel_stats):
# one row per channel would leave most of a GPU's SMs idle (132 on the H200, two rows each).
SPLIT_STATS_BELOW_CHANNELS = 256


def _channel_stats(x):
    """Mean and biased variance of x (N, C, ...) per channel, kept as (1, C, 1, ...), in one pass
    over x (see _moments). With few channels and spatial dimensions, in two steps so that the long
    reduction has enough rows to fill the GPU: the moments per (n, c) row, then over N, exactly, by
    the pairwise combination of Chan et al. (every row has m elements)."""
    spatial = list(range(2, x.dim()))
    if not (spatial and x.shape[0] > 1 and x.shape[1] < SPLIT_STATS_BELOW_CHANNELS):
        mean, m2, m = _moments(x, [0] + spatial)
        return mean, m2 / m
    row_mean, row_m2, m = _moments(x, spatial)
    mean = row_mean.mean(0, keepdim=True)
    spread = row_mean - mean
    return mean, (row_m2.sum(0, keepdim=True) + (spread * spread).sum(0, keepdim=True) * m) / (m * x.shape[0])


def _batch_stats(x, weight, bias, eps):
    """Normalisation of x by its statistics per channel (over N and the spatial dimensions).
    Returns out, mean, biased var, rstd."""
    mean, var = _channel_stats(x)
    rstd = torch.rsqrt(var + eps)
    out = (x - mean) * rstd
    if weight is not None:
        out = out * _channel_view(weight, x)
    if bias is not None:
        out = out + _channel_view(bias, x)
    return out, mean.view(-1), var.view(-1), rstd.view(-1)


def _batch_norm_no_stats(x, weight, bias, training, momentum, eps):
    """Batch statistics without running ones (InstanceNorm is this over x viewed as (1, N*C, ...))."""
    out, mean, _, rstd = _batch_stats(x, weight, bias, eps)
    return out, mean, rstd


def _batch_norm_functional(x, weight, bias, running_mean, running_var, training, momentum, eps):
    """BatchNorm in training mode: batch statistics, and the running statistics updated as PyTorch
    does (the variance's unbiased estimate), returned for the caller to store. Each update starts
    from the batch statistic (old + (new - old) * momentum), so that it joins the statistics' row
    group as a per-channel output instead of needing a kernel of its own."""
    out, mean, var, rstd = _batch_stats(x, weight, bias, eps)
    n = x.numel() // x.shape[1]
    new_mean = running_mean + (mean - running_mean) * momentum
    new_var = running_var + (var * (n / max(n - 1, 1)) - running_var) * momentum
    return out, mean, rstd, new_mean, new_var


def _batch_norm_no_training(x, weight, bias, running_mean, running_var, momentum, eps):
    """BatchNorm in eval mode: the running statistics, elementwise. The variance is broadcast before
    anything is computed from it, so that every op is over x's elements and the whole norm fuses
    into the chain that makes x (e.g. a convolution's epilogue)."""
    out = (x - _channel_view(running_mean, x)) * torch.rsqrt(_channel_view(running_var, x).expand(x.shape) + eps)
    if weight is not None:
        out = out * _channel_view(weight, x)
    if bias is not None:
        out = out + _channel_view(bias, x)
    return out, x.new_empty(0), x.new_empty(0)


def _var(x, dim=None, *, correction=None, keepdim=False):
    """var (and so std) as mean, then the sum of squared deviations over n - correction."""
    dims = list(range(x.dim())) if dim is None or len(dim) == 0 else list(dim)
    n = 1
    for d in dims:
        n *= x.shape[d]
    centred = x - x.mean(dims, keepdim=True)
    return (centred * centred).sum(dims, keepdim=keepdim) / float(max(n - (1 if correction is None else correction), 0))


def _nll_loss_forward(self, target, weight, reduction, ignore_index):
    """nll_loss over classes (N, C) without class weights: the log-probability at each target
    gathered, ignored targets counting 0, and the mean over the counted ones as a float sum (so
    that no int64 count is reduced). Other forms keep torch's decomposition."""
    if weight is not None or self.dim() != 2:
        from torch._decomp.decompositions import nll_loss_forward
        return nll_loss_forward(self, target, weight, reduction, ignore_index)
    counted = target != ignore_index
    picked = torch.gather(self, 1, torch.where(counted, target, 0).unsqueeze(1)).squeeze(1)
    loss = torch.where(counted, -picked, 0.0)
    total = counted.to(self.dtype).sum()
    if reduction == 0:  # none
        return loss, total
    return (loss.sum() / total if reduction == 1 else loss.sum()), total


def _safe_softmax(x, dim, dtype=None):
    """scaled_dot_product_attention's softmax, whose rows that are wholly -inf (masked out) are 0,
    not NaN: such a row is the one whose maximum is -inf, so the guard reads the softmax's own
    statistic and stays in its row group (torch's decomposition tests every element again)."""
    if dtype is not None:
        x = x.to(dtype)
    top = torch.amax(x, dim, keepdim=True)
    e = torch.exp(x - top)
    return torch.where(top == float("-inf"), 0.0, e / e.sum(dim, keepdim=True))


def _attention_fused(q, k, v, attn_mask, dropout_p, enable_gqa):
    """Whether the planner runs this scaled_dot_product_attention as one kernel (the attention
    family, tuner/src/families/attention.cpp): no mask tensor or dropout; 3-D or 4-D q, k and v
    with one head dimension D, a multiple of 8 up to 128; k and v broadcast over q's batch and
    heads, or under enable_gqa (4-D only) each of k's heads serves as many of q's in turn; at most
    65535 of q's heads in all (the kernel's grid)."""
    if attn_mask is not None or dropout_p != 0 or (enable_gqa and q.dim() != 4):
        return False
    if not (q.dim() == k.dim() == v.dim() and q.dim() in (3, 4)) or min(q.shape[-2], k.shape[-2]) == 0:
        return False
    d = q.shape[-1]
    if k.shape[-1] != d or v.shape[-1] != d or k.shape[:-1] != v.shape[:-1] or d % 8 or d > 128:
        return False
    lead = list(zip(q.shape[:-2], k.shape[:-2]))
    if enable_gqa:
        (qh, kh) = lead.pop()
        if kh == 0 or qh % kh:
            return False
    return all(kd in (qd, 1) for qd, kd in lead) and q.shape[:-2].numel() <= 65535


def _attention(default):
    """scaled_dot_product_attention kept as one op where the attention family runs it, otherwise
    `default` (torch's math form: products and a safe softmax, which the planner fuses as such)."""
    def attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        if _attention_fused(q, k, v, attn_mask, dropout_p, enable_gqa):
            return NotImplemented
        return default(q, k, v, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
    return attention


def _max_dim(x, dim, keepdim=False):
    """torch.max(x, dim): amax and argmax over the same rows (one row group in the planner)."""
    return torch.amax(x, dim, keepdim), torch.argmax(x, dim, keepdim)


def _min_dim(x, dim, keepdim=False):
    return torch.amin(x, dim, keepdim), torch.argmin(x, dim, keepdim)


def _any(x, dim=None, keepdim=False):
    """any over dimensions (all of them by default): the maximum of x != 0, as floats, is not 0."""
    dims = list(range(x.dim())) if dim is None else dim
    return torch.amax((x != 0).to(torch.float32), dims, keepdim) != 0


def _all(x, dim=None, keepdim=False):
    dims = list(range(x.dim())) if dim is None else dim
    return torch.amin((x != 0).to(torch.float32), dims, keepdim) != 0


def _gather_rows(x, d, idx, wrap):
    """x indexed along dimension d by the int64 tensor idx (its dimensions in place of d): a gather
    from x viewed with idx's dimensions inserted before d; `wrap` counts negative indices from the
    end, as indexing does (index_select and embedding refuse them: the gather's range check)."""
    m, shape = idx.dim(), list(x.shape)
    out_shape = shape[:d] + list(idx.shape) + shape[d + 1:]
    table = x.reshape(shape[:d] + [1] * (m - 1) + shape[d:]).expand(shape[:d] + list(idx.shape[:-1]) + shape[d:])
    if wrap:
        idx = torch.where(idx < 0, idx + shape[d], idx)
    idx = idx.reshape([1] * d + list(idx.shape) + [1] * (len(shape) - d - 1)).expand(out_shape)
    return torch.gather(table, d + m - 1, idx)


def _index(x, indices):
    """x[..., i, j, ...] with int64 index tensors (broadcast together) on some dimensions, as
    indexing does: the indexed dimensions flattened into one and read by one gather at the linear
    index (negative indices counted from each dimension's end). Where the indexed dimensions are
    not adjacent, they are moved first, and so are the index dimensions in the result, as PyTorch
    does. An index outside its dimension makes the linear index -1, out of the gather's range.
    Bool masks (data-dependent sizes) are left to torch.export."""
    tensors = [(d, i) for d, i in enumerate(indices) if i is not None]
    if not tensors or any(i.dtype != torch.int64 for _, i in tensors):
        return NotImplemented
    dims = [d for d, _ in tensors]
    if dims != list(range(dims[0], dims[-1] + 1)):
        rest = [d for d in range(x.dim()) if d not in dims]
        return _index(x.permute(dims + rest), [i for _, i in tensors])
    first, last = dims[0], dims[-1]
    shape = list(x.shape)
    linear, stride, inside = None, 1, None
    for d, i in reversed(tensors):
        if len(tensors) > 1:
            fits = torch.logical_and(i >= -shape[d], i < shape[d])
            inside = fits if inside is None else torch.logical_and(inside, fits)
        i = torch.where(i < 0, i + shape[d], i)
        linear = i if linear is None else linear + i * stride
        stride *= shape[d]
    if inside is not None:  # an index outside its dimension: -1, at which the gather traps (torch raises)
        linear = torch.where(inside, linear, -1)
    flat = x if first == last else x.reshape(shape[:first] + [stride] + shape[last + 1:])
    if linear.dim() == 0:  # x[2, 3]: one element of the indexed dimensions
        return _gather_rows(flat, first, linear.reshape(1), wrap=False).squeeze(first)
    return _gather_rows(flat, first, linear, wrap=False)


def _index_select(x, dim, idx):
    if idx.dtype != torch.int64 or x.dim() == 0:
        return NotImplemented
    return _gather_rows(x, dim % x.dim(), idx.reshape(-1), wrap=False)


def _embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    if indices.dtype != torch.int64 or indices.dim() == 0:
        return NotImplemented
    return _gather_rows(weight, 0, indices, wrap=False)


def _copy(self, src, non_blocking=False):
    """copy_ made functional (a state overwritten from an input): src in self's dtype and shape."""
    return src.to(self.dtype).expand(self.shape).clone()


def _roll(x, shifts, dims=()):
    """roll as a cat of two slices per rolled dimension, which the planner reads where they lie
    (in an elementwise kernel, or in the loads of a row op along that dimension), instead of
    torch's gather by a computed index; without dims, the flattened tensor rolled."""
    if not dims:
        return _roll(x.reshape(-1), shifts, [0]).view(x.shape)
    for shift, d in zip(shifts, dims):
        n = x.shape[d]
        shift = shift % n if n else 0
        if shift:
            x = torch.cat((x.narrow(d, n - shift, shift), x.narrow(d, 0, n - shift)), dim=d)
    return x


def _lstm(inner):
    """torch's LSTM decomposition, with h_n and c_n in their own shapes: it leaves a dimension of
    1 in each layer's ([layers, 1, batch, hidden] instead of [layers, batch, hidden]: it squeezes
    the batch dimension instead of the one it added)."""
    def lstm(input, hx, params, *args):
        out, hn, cn = inner(input, hx, params, *args)
        return out, hn.reshape(hx[0].shape), cn.reshape(hx[1].shape)
    return lstm


def decompositions():
    """Core ATen, plus softmax, log_softmax, vector norms, var, layer, group and batch norm written
    out in reductions and elementwise ops, which the planner fuses back into one row group each;
    max and min over a dimension as their value and index reductions, any and all as a float
    maximum and minimum, indexing by int64 tensors (index, index_select, embedding) as a gather,
    copy_ into a tensor as its source broadcast and converted, roll as cats of slices,
    interpolation (upsample) as reads at computed indices, LSTM's final states in their shapes, and
    scaled_dot_product_attention kept as one op where one kernel runs it."""
    from torch._decomp import get_decompositions
    table = torch.export.default_decompositions()
    table.update(get_decompositions([torch.ops.aten._softmax, torch.ops.aten._log_softmax,
                                     torch.ops.aten.linalg_vector_norm]))
    # Interpolation: source indices computed from aranges, the input read at them (_index), and
    # linear modes' weights, all elementwise.
    aten = torch.ops.aten
    table.update(get_decompositions([
        aten.upsample_nearest1d, aten.upsample_nearest2d, aten.upsample_nearest3d, aten._upsample_nearest_exact1d,
        aten._upsample_nearest_exact2d, aten._upsample_nearest_exact3d, aten.upsample_linear1d,
        aten.upsample_bilinear2d, aten.upsample_trilinear3d, aten.upsample_bicubic2d]))
    table[torch.ops.aten.var.correction] = _var
    table[torch.ops.aten.native_layer_norm.default] = _layer_norm
    table[torch.ops.aten.native_group_norm.default] = _group_norm
    table[torch.ops.aten._native_batch_norm_legit.no_stats] = _batch_norm_no_stats
    table[torch.ops.aten._native_batch_norm_legit_functional.default] = _batch_norm_functional
    table[torch.ops.aten._native_batch_norm_legit_no_training.default] = _batch_norm_no_training
    table[torch.ops.aten.nll_loss_forward.default] = _nll_loss_forward
    table[torch.ops.aten._safe_softmax.default] = _safe_softmax
    sdpa = torch.ops.aten.scaled_dot_product_attention.default
    table[sdpa] = _attention(table[sdpa])
    table[torch.ops.aten.max.dim] = _max_dim
    table[torch.ops.aten.min.dim] = _min_dim
    for op in (torch.ops.aten.any.dim, torch.ops.aten.any.dims, torch.ops.aten.any.default):
        table[op] = _any
    for op in (torch.ops.aten.all.dim, torch.ops.aten.all.default):
        table[op] = _all
    table[torch.ops.aten.index.Tensor] = _index
    table[torch.ops.aten.index_select.default] = _index_select
    table[torch.ops.aten.embedding.default] = _embedding
    table[torch.ops.aten.copy.default] = _copy
    table[torch.ops.aten.roll.default] = _roll
    table[aten.lstm.input] = _lstm(table[aten.lstm.input])
    return table
