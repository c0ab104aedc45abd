"""What kind of mistake a wrong gradient shows: every element off by one factor, a flipped sign, one offset."""

from __future__ import annotations

import torch


def mistake_pattern(pairs: torch.Tensor) -> str | None:
    """What kind of mistake the (backward, reference) pairs show: a factor, a flipped sign, an offset."""
    got, ref = pairs
    if got.numel() < 2:
        return None
    if bool((ref.abs() > 1e-12).all()):
        ratio = got / ref
        mid = float(ratio.median())
        # one factor: the ratios agree closely, and far more closely than the factor is from 1 (ratios of
        # 0.99988, 0.99990, 0.99938 are rounding, not a factor)
        spread = min(1e-3 * max(1.0, abs(mid)), 0.01 * abs(mid - 1))
        if mid != 1 and bool(((ratio - mid).abs() <= spread).all()):
            if abs(mid + 1) < 1e-3:
                return "every element is off by the same factor: the sign is flipped"
            return f"every element is off by the same factor {mid:.6g}"
    offset = got - ref
    mid = float(offset.median())
    if mid != 0 and bool(((offset - mid).abs() <= min(1e-4 * max(1.0, abs(mid)), 0.01 * abs(mid))).all()):
        return f"every element is off by the same amount {mid:.6g}"
    return None
