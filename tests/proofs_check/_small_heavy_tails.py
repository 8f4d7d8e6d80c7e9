"""Shrunken H1 depth check for the tests: the df 3 prior at N = 1024, four seeds (the real check's first), and the
depths 0.8 .. 1.25 T* (the band) only.

The criterion is the real check's; at this size the decision is that of these seeds (fixed), which pass (T_min/T*
in-sample 1.05 [0.91, 1.20] on the full grid).
"""

from attneb.proofs_check.topics.stage2 import heavy_tails


def shrink_heavy_tails(monkeypatch):
    real = heavy_tails.depth_configs

    def small(quick):
        return {part: {**config, "n": [1024], "seeds": {**config["seeds"], "count": 4}}
                for part, config in real(quick).items() if part == "student-t3"}

    monkeypatch.setattr(heavy_tails, "depth_configs", small)
    monkeypatch.setattr(heavy_tails, "DEPTHS", (0.8, 0.9, 1.0, 1.1, 1.25))
