"""A broad tool set of our own: thousands of procedurally built functions and their examples.

Read top to bottom: ``domains`` (what the functions are about) -> ``naming`` (how they are
spelled) -> ``values`` (values as people write them, and their canonical form) ->
``signatures`` (one function per domain, entity and verb) -> ``phrasing`` (a call and the
query asking for it) -> ``kinds`` (one example of each BFCL kind) -> ``splits`` (held-out
functions) -> ``overlap`` (the BFCL contamination check) -> ``generate`` (end to end, files).
Run it as ``toolrl data generate --generator broad --examples 20000 --seed 0 --out DIR``.
"""

from toolrl_lib.data.toolset.generate import BroadData, broad_stats, generate_broad, write_broad
from toolrl_lib.data.toolset.signatures import all_signatures

__all__ = ["BroadData", "all_signatures", "broad_stats", "generate_broad", "write_broad"]
