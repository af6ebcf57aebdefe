"""Train/validation/test over held-out functions: no val or test signature is ever in train.

Signatures are split in groups of one (domain, entity) — the entity's eight functions go
together — so a validation example offers only functions (and even an entity) the model
never trained on: validation then measures generalisation to unseen tools, not recall.
The assignment hashes the group with the seed, so it is stable and independent of order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from toolrl_lib.data.toolset.signatures import Signature

SPLITS = ("train", "val", "test")


def group_share(domain: str, entity: str, seed: int) -> float:
    """A stable number in [0, 1) for a signature group.

    >>> 0 <= group_share("beekeeping", "hive", 0) < 1
    True
    """
    digest = hashlib.blake2b(f"{seed}/{domain}/{entity}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def split_signatures(signatures: Sequence[Signature], seed: int, val_fraction: float = 0.1,
                     test_fraction: float = 0.1) -> dict[str, list[Signature]]:
    """``{"train", "val", "test"}`` -> signatures, disjoint, by (domain, entity) group."""
    for name, value in (("val_fraction", val_fraction), ("test_fraction", test_fraction)):
        if not 0.0 < value < 0.5:
            raise ValueError(f"{name} must be in (0, 0.5), got {value}")
    out: dict[str, list[Signature]] = {split: [] for split in SPLITS}
    for sig in signatures:
        share = group_share(sig.domain, sig.entity, seed)
        split = "val" if share < val_fraction else "test" if share < val_fraction + test_fraction else "train"
        out[split].append(sig)
    empty = [split for split, sigs in out.items() if not sigs]
    if empty:
        raise ValueError(f"split(s) {empty} got no signature; use more signatures or larger fractions")
    return out
