"""Dialogue ids seen so far, in 8 bytes an id (a dataset of a million dialogues keeps 8 MB, not 200)."""

from __future__ import annotations

import numpy as np


class SeenIds:
    """The dialogue ids seen so far, as 64-bit hashes: 8 bytes an id in a sorted array, and the
    latest few thousand in a set that is merged into it when full.

    A dict of the ids themselves and where each was first seen costs ~200 bytes an id (246 MB
    at a million dialogues); this costs ~8, so validating stays flat in the number of
    dialogues. A hit may be false (two ids with one hash): the caller confirms it.
    """

    RECENT = 1 << 14

    def __init__(self) -> None:
        self.old = np.empty(0, dtype=np.int64)
        self.recent: set[int] = set()

    def add(self, h: int) -> bool:
        """Record the hash ``h``; True if it was recorded before."""
        if h in self.recent:
            return True
        old = self.old
        if len(old):
            i = int(old.searchsorted(h))
            if i < len(old) and old[i] == h:
                return True
        self.recent.add(h)
        if len(self.recent) >= self.RECENT:
            n = len(old)
            del old
            # grown in place (realloc, which moves pages rather than copies them), never held twice
            self.old.resize(n + len(self.recent), refcheck=False)
            self.old[n:] = np.fromiter(self.recent, dtype=np.int64, count=len(self.recent))
            self.old.sort(kind="stable")  # a sorted run and a short tail: a merge, not a full sort
            self.recent = set()
        return False
