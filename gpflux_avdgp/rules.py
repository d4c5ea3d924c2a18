"""The paper's amortization rules, one enum: :class:`ModelRule` names the rule of a whole
model (AR1, AR2, AR2P, AR2PP) and gives the rule its layers propagate with
(:class:`~gpflux_avdgp.propagation.PropagationRule`; AR2PP's layers are AR2P's) and the data
term it trains (:class:`Objective`; AR2PP's is the predictive one); :class:`KLConvention`
says how an amortized layer's KL term enters it."""

from __future__ import annotations

import enum

from .propagation import PropagationRule

__all__ = ["KLConvention", "ModelRule", "Objective"]


class Objective(str, enum.Enum):
    """Data term of the training objective."""

    ELBO = "elbo"  #: expected log-likelihood (AR1, AR2, AR2P)
    PREDICTIVE = "predictive"  #: log predictive density (AR2PP, DSPP)


class ModelRule(str, enum.Enum):
    """A model's amortization rule, as the paper names it."""

    AR1 = "ar1"  #: Monte Carlo samples, per-sample inducing variables; ELBO
    AR2 = "ar2"  #: Monte Carlo samples, inducing variables from the mixture mean; ELBO
    AR2P = "ar2p"  #: learnable sigma points; ELBO
    AR2PP = "ar2pp"  #: learnable sigma points; predictive objective

    @property
    def layer_rule(self) -> PropagationRule:
        """The rule the model's layers propagate with."""
        return PropagationRule.AR2P if self is ModelRule.AR2PP else PropagationRule(self.value)

    @property
    def objective(self) -> Objective:
        """The data term the model trains."""
        return Objective.PREDICTIVE if self is ModelRule.AR2PP else Objective.ELBO


class KLConvention(str, enum.Enum):
    """How a layer's per-datapoint KL divergences enter the per-datapoint objective.

    * ``"paper"``: ``mean_b KL_b / N``, the paper's minibatch bound (IDSGP and the reference
      code do the same): the local KLs weigh like one global KL.
    * ``"per_point"``: ``mean_b KL_b``, every datapoint pays its own full KL, the strict ELBO
      for local inducing variables (``N`` times stronger regularisation).
    """

    PAPER = "paper"
    PER_POINT = "per_point"
