"""The common prefix of two encodings of a history: what every history delta keeps of its base.

Two deltas are built on it: a thread's stored history blobs (`harness.threads.blobs`) and the checkpoint
candidates a host asks for in CHECKPOINT_FORM_DELTA (the server's `mapping.checkpoints`). A run rewrites
the tail of its history in place and normalisation rewrites it too, so a delta keeps the longest common
byte prefix rather than assuming appended messages; the prefix ends on a UTF-8 character boundary, so
the appended rest is text of its own.
"""

from __future__ import annotations

__all__ = ("common_prefix",)


def common_prefix(base: bytes, data: bytes) -> int:
    """How many leading bytes `data` shares with `base`, backed off to a UTF-8 character boundary of `data`.

    The usual case, new data extending the old up to its closing bracket, is one `memcmp`; otherwise a
    bisection whose comparisons add up to about the shared prefix's length. `bytes.startswith` compares a
    memoryview of `base` in place: slicing either side would copy it, and comparing two memoryviews
    goes byte by byte.
    """
    view = memoryview(base)
    limit = min(len(base), len(data))
    if limit and data.startswith(view[: limit - 1]):
        keep = limit if base[limit - 1] == data[limit - 1] else limit - 1
    else:
        low, high = 0, max(limit - 1, 0)  # base[:low] == data[:low]; base[:high] != data[:high]
        while high - low > 1:
            middle = (low + high) // 2
            if data.startswith(view[low:middle], low):
                low = middle
            else:
                high = middle
        keep = low
    while 0 < keep < len(data) and data[keep] & 0xC0 == 0x80:  # a UTF-8 continuation byte
        keep -= 1
    return keep
