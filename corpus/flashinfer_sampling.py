"""The FlashInfer corpus's sampling cases (corpus.flashinfer_cases holds the others)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .flashinfer_cases import Case, _t, close, nan_like

# ---- sampling: float probabilities over V, int32 ids; results are random: checked against the distribution rules

B, V = 37, 32000


def _probs() -> Any:
    torch = _t()
    return torch.softmax(torch.randn(B, V, device="cuda") * 3, -1)


def _sample_args(extra: list[Any], d: int = V) -> list[Any]:
    torch = _t()
    seed = int(torch.randint(0, 2**31, (1,)))
    return [*extra, d, None, seed, None, 0, 0, 0]


def _ids_out() -> tuple[Any, Any]:
    """(sampled ids, pre-filled with -1; the valid flags)."""
    torch = _t()
    return torch.full((B,), -1, dtype=torch.int32, device="cuda"), torch.zeros(B, dtype=torch.bool, device="cuda")


def _ids_ok(out: Any, allowed: Any) -> str:
    o = out.long()
    if (o < 0).any() or (o >= V).any():
        return f"sampled ids out of range: {o[(o < 0) | (o >= V)][:5].tolist()}"
    ok = allowed.gather(1, o[:, None]).squeeze(1)
    if not bool(ok.all()):
        return f"{int((~ok).sum())}/{B} sampled ids outside the allowed set"
    return ""


def case_sampling_from_prob(variant: str) -> Case:
    p = _probs()
    out, valid = _ids_out()
    return Case(_sample_args([p, out, valid, None]), (B, 1, 1), None, 0, [], lambda: _ids_ok(out, p > 0))


def case_sampling_from_logits(variant: str) -> Case:
    torch = _t()
    logits = torch.randn(B, V, device="cuda") * 3
    out = torch.full((B,), -1, dtype=torch.int32, device="cuda")
    return Case(_sample_args([logits, out, None]), (B, 1, 1), None, 0, [],
                lambda: _ids_ok(out, torch.isfinite(logits)))


def _topk_mask(p: Any, k: int) -> Any:
    kth = p.topk(k, -1).values[:, -1:]
    return p >= kth


def _topp_mask(p: Any, top_p: float) -> Any:
    torch = _t()
    s, idx = p.double().sort(-1, descending=True)
    keep = (s.cumsum(-1) - s) < top_p + 1e-6
    mask = torch.zeros_like(keep)
    return mask.scatter(1, idx, keep)


def case_top_k_sampling(variant: str) -> Case:
    p = _probs()
    out, valid = _ids_out()
    return Case(_sample_args([p, out, valid, None, None, 50]), (B, 1, 1), None, 0, [],
                lambda: _ids_ok(out, _topk_mask(p, 50)))


def case_top_p_sampling(variant: str) -> Case:
    p = _probs()
    out, valid = _ids_out()
    return Case(_sample_args([p, out, valid, None, None, 0.9]), (B, 1, 1), None, 0, [],
                lambda: _ids_ok(out, _topp_mask(p, 0.9)))


def case_min_p_sampling(variant: str) -> Case:
    p = _probs()
    out, valid = _ids_out()
    allowed = p >= 0.1 * p.max(-1, keepdim=True).values * (1 - 1e-5)
    return Case(_sample_args([p, None, out, valid, None, 0.1]), (B, 1, 1), None, 0, [],
                lambda: _ids_ok(out, allowed))


def case_top_k_top_p_sampling(variant: str) -> Case:
    p = _probs()
    out, valid = _ids_out()
    return Case(_sample_args([p, None, None, out, valid, None, 50, 0.9]), (B, 1, 1), None, 0, [],
                lambda: _ids_ok(out, _topk_mask(p, 50)))


def case_top_p_renorm(variant: str) -> Case:
    torch = _t()
    p = _probs()
    out = nan_like((B, V), torch.float32)

    def check() -> str:
        # the tokens clearly inside the top-p set (the mass before them under 0.9 by more than fp32's rounding of a
        # 32k-term sum): the kernel sums in fp32, so a token whose fp64 prefix is a hair under 0.9 may fall outside
        keep = _topp_mask(p, 0.9 - 1e-4)
        ref = torch.where(keep, p.double(), 0.0)
        ref = ref / ref.sum(-1, keepdim=True)
        # the kernel's pivot search may keep ties at the boundary: compare the kept mass and the zeros
        dropped = int(((out > 0) < (ref > 0)).sum())
        return close(out.sum(-1), torch.ones(B, dtype=torch.float64, device="cuda"), 1e-3, 1e-3, "row sums") or (
            "" if not dropped else f"{dropped} of {int((ref > 0).sum())} tokens of the top-p set dropped")
    return Case([p, out, None, 0.9, V], (B, 1, 1), None, 0, [out], check)


def case_online_softmax_fused(variant: str) -> Case:
    torch = _t()
    logits = torch.randn(B, V, device="cuda") * 3
    out = nan_like((B, V), torch.float32)
    return Case([logits, out, None, 0.7, V], (B, 1, 1), None, 0, [out],
                lambda: close(out, torch.softmax(logits.double() / 0.7, -1), 1e-4, 1e-7))


def online_softmax_slice_stride(d: int, num_slices: int, align_elems: int) -> int:
    """sampling.cuh OnlineSoftmaxMapKernel: ``round_up(ceil_div(d, num_slices), vec_alignment_elems)``."""
    per = -(-d // num_slices)
    return -(-per // align_elems) * align_elems


def case_online_softmax_map(variant: str) -> Case:
    torch = _t()
    logits = torch.randn(B, V, device="cuda") * 3
    slices = math.ceil(V / 8192)  # the launcher's num_slices: ceil_div(d, DEFAULT_SLICE_SIZE)
    # the kernel's slice y covers [y * stride, min((y + 1) * stride, d)) with stride = round_up(ceil_div(d,
    # num_slices), alignof(vec_t<float, 4>) / sizeof(float)) -- not DEFAULT_SLICE_SIZE
    stride = online_softmax_slice_stride(V, slices, 4)
    partial = nan_like((B, slices, 2), torch.float32)  # PartialSoftmaxResult {float max_val; float denominator}

    def check() -> str:
        x = (logits.double() / 0.7).view(B, -1)
        ref_max = torch.stack([x[:, i * stride:(i + 1) * stride].max(-1).values for i in range(slices)], 1)
        ref_den = torch.stack([(x[:, i * stride:(i + 1) * stride] - ref_max[:, i:i + 1]).exp().sum(-1)
                               for i in range(slices)], 1)
        return close(partial[..., 0], ref_max, 1e-5, 1e-5, "max") or close(partial[..., 1], ref_den, 1e-4, 1e-4,
                                                                               "denominator")
    return Case([logits, partial, None, 0.7, V, slices], (B, slices, 1), None, 0, [partial], check)


def case_online_softmax_reduce(variant: str) -> Case:
    torch = _t()
    logits = torch.randn(B, V, device="cuda") * 3
    slices = math.ceil(V / 8192)
    x = logits.double() / 0.7
    mx = torch.stack([x[:, i * 8192:(i + 1) * 8192].max(-1).values for i in range(slices)], 1)
    den = torch.stack([(x[:, i * 8192:(i + 1) * 8192] - mx[:, i:i + 1]).exp().sum(-1) for i in range(slices)], 1)
    partial = torch.stack([mx, den], -1).float().contiguous()
    out = nan_like((B, V), torch.float32)
    return Case([logits, out, partial, None, 0.7, V, slices], (B, 1, 1), None, 0, [out],
                lambda: close(out, torch.softmax(x, -1), 1e-4, 1e-7))


def case_chain_speculative(variant: str) -> Case:
    torch = _t()
    n = 4
    draft = torch.softmax(torch.randn(B, n, V, device="cuda"), -1)
    target = torch.softmax(torch.randn(B, n + 1, V, device="cuda"), -1)
    draft_ids = torch.randint(0, V, (B, n), dtype=torch.int32, device="cuda")
    out = torch.full((B, n + 1), -2, dtype=torch.int32, device="cuda")
    acc, emitted = torch.zeros(B, dtype=torch.int32, device="cuda"), torch.zeros(B, dtype=torch.int32,
                                                                                   device="cuda")

    def check() -> str:
        e = emitted.long()
        if (e < 0).any() or (e > n).any():
            return f"emitted counts out of [0, {n}]"
        for b in range(B):
            row = out[b].long()
            k = int(e[b])
            if row[:k].tolist() != draft_ids[b, :k].long().tolist():
                return f"row {b}: accepted prefix differs from the draft ids"
            if not 0 <= int(row[k]) < V:
                return f"row {b}: no token emitted after {k} accepted"
        return ""
    return Case([draft, draft_ids, target, out, acc, emitted, n, V, None, 0, None, 0, 0, 0], (B, 1, 1), None, 0,
                [], check)


CASES: dict[str, Callable[[str], Case]] = {
    "sampling_from_logits": case_sampling_from_logits, "sampling_from_prob": case_sampling_from_prob,
    "top_k_sampling_from_prob": case_top_k_sampling, "top_p_sampling_from_prob": case_top_p_sampling,
    "min_p_sampling_from_prob": case_min_p_sampling, "top_k_top_p_sampling_from_prob": case_top_k_top_p_sampling,
    "top_p_renorm_prob": case_top_p_renorm, "online_softmax_fused": case_online_softmax_fused,
    "online_softmax_map": case_online_softmax_map, "online_softmax_reduce": case_online_softmax_reduce,
    "chain_speculative_sampling": case_chain_speculative,
}
