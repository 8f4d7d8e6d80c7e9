"""Shrunken configurations of E3, of the particle check G1 and of G2 at eta = 1 for the tests.

G2 at eta = 1 keeps its 65536 tokens (its first layer carries a finite-N bias of about 0.13% there and
0.5% at 16384, against +-0.3%) and shrinks only the reported risk comparison.

The pass criteria are those of the real checks; only the designs are smaller. The onset runs keep
quick mode's token counts (1024 to 16384: the confirmatory E3 check's +-10% on the N_c law is set
for those; at N <= 2048 the coefficient sits ~7% above the prediction and the clumps form at
~1.1 k*) and five seeds (with four, the t-intervals are wider than the +-10%), at two of its three
bandwidths; a broken kernel must reach both paths (exact and binned) to reach them. The dimension runs keep
h2 = 0.1 and the criterion in 2-D only, at N = 2048 and 2896 with 6 seeds: a 3-D run at the N its linear regime
needs (4096) costs as much as the rest, and a single 1-D run's fluctuation scatters by 25-90% (its interval
over 6 seeds of six N reached below half the prediction); d = 1 and 3 run in `attneb verify`.
"""

from attneb.proofs_check.topics.gaussian import blurring, horizon
from attneb.proofs_check.topics.stability import dimension, onset

#: Four of G1's six cases (sigma2/tau2 = 0.2, 0.5, 2, 5; the cheaper horizons).
SMALL_HORIZON_CASES = ((0.25, 1.25, 0.25), (0.5, 1.0, 0.5), (2.0, 1.0, 1.0), (2.5, 0.5, 1.0))


def shrink_stability(monkeypatch):
    monkeypatch.setattr(onset, "sizes", lambda quick: ([300, 600, 8000], 3))
    monkeypatch.setattr(dimension, "dimension_design",
                        lambda quick: {"n": {2: [2048, 2896]}, "seeds": 6})
    monkeypatch.setattr(onset, "onset_design",
                        lambda quick: {"h2": [0.025, 0.0125], "n": [1024, 4096, 16384], "seeds": 5})
    monkeypatch.setattr(onset, "CONFIRM_QUICK_SEEDS", 5)
    monkeypatch.setattr(horizon, "HORIZON_CASES", SMALL_HORIZON_CASES)
    monkeypatch.setattr(horizon, "horizon_design", lambda quick: {"n": 32768, "seeds": 3})
    monkeypatch.setattr(blurring, "blurring_design",
                        lambda quick: {"n": 65536, "seeds": 8, "risk_n": 2048, "risk_seeds": 2})
