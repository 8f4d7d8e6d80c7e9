"""What a sweep can run: the estimators by their config names, and the prior families.

:data:`ESTIMATORS` maps each name an experiment file may list to an :class:`EstimatorEntry`:
how to build the estimator, which sweep hyperparameters it takes, and whether its runs are
heavy. The prior families are the concrete :class:`attneb.numerics.priors.Prior` classes that
:mod:`attneb.numerics.priors` exports, named by their class names.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .. import estimators as _estimators
from .. import priors as _priors


@dataclass(frozen=True)
class EstimatorEntry:
    """How the sweep builds one estimator.

    Attributes
    ----------
    name : str
        Short name used in configs and rows.
    load : callable
        Returns the estimator class.
    uses : tuple of str
        The sweep hyperparameters the estimator takes, among ``"h2"``, ``"T"``, ``"eta"``,
        ``"method"``; a run of this estimator carries only these.
    needs_prior : bool
        Whether the constructor takes the true prior (the oracle).
    heavy : bool
        Whether one run costs much more than a kernel sum over the batch (a particle flow, an
        optimisation); heavy runs of one batch go to separate tasks (but two-stage runs that share a Stage-1 path,
        :attr:`RunSpec.path_key`, go to one), light ones share a task.
    context : {"noisy", "clean"}
        The tokens the estimator is fitted on; it always denoises the noisy tokens. ``"clean"``
        is the clean-context special case (an attention step over the prior draws themselves).
    """

    name: str
    load: Callable[[], type]
    uses: tuple[str, ...] = ()
    needs_prior: bool = False
    heavy: bool = False
    context: str = "noisy"

    def managed(self) -> tuple[str, ...]:
        """Constructor arguments set by the sweep itself (never through ``options``)."""
        return ("sigma2", *self.uses, *(("prior",) if self.needs_prior else ()))


ESTIMATORS: dict[str, EstimatorEntry] = {
    e.name: e
    for e in (
        EstimatorEntry("two-stage", lambda: _estimators.TwoStageDenoiser, ("h2", "T", "eta", "method"), heavy=True),
        EstimatorEntry("stage-two-only", lambda: _estimators.StageTwoOnly),
        EstimatorEntry("tweedie-kde", lambda: _estimators.TweedieKDE, ("h2",)),
        EstimatorEntry("linear", lambda: _estimators.LinearShrinkage),
        EstimatorEntry("oracle", lambda: _estimators.OracleBayes, needs_prior=True),
        EstimatorEntry("npmle", lambda: _estimators.NPMLE, heavy=True),
        EstimatorEntry("clean-context", lambda: _estimators.StageTwoOnly, context="clean"),
    )
}


def prior_families() -> dict[str, type]:
    out = {}
    for name in _priors.__all__:
        obj = getattr(_priors, name)
        if isinstance(obj, type) and issubclass(obj, _priors.Prior) and not inspect.isabstract(obj):
            out[name] = obj
    return out



def build_prior(spec: Mapping) -> _priors.Prior:
    params = dict(spec)
    return prior_families()[params.pop("family")](**params)
