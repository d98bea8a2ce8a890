"""The built-in decisions, each registered on the :class:`~mixlaw.decide.contract.Decision` contract.

One module per decision family; :func:`mixlaw.decide.registry.decision_names` imports them all on first use.
Each adapts its engine (:mod:`mixlaw.decide.cmr`, :mod:`mixlaw.decide.mixture`, :mod:`mixlaw.design.plan`) to the
contract: its options as one frozen dataclass, its answers as named values with intervals, its statuses as
:class:`~mixlaw.decide.contract.Status` and reason codes.
"""
