"""The ``reference`` model kind: the agents that read the bench (`yanami.world._agents`), the
floor of trivial agents, and the agent that reads only what a model sees (`yanami.world._visible`)."""

from __future__ import annotations

from yanami.world._agents import TRIVIAL, VISIBLE, ReferenceAgent, TrivialAgent
from yanami.world._parse import IN_PROCESS, Parser
from yanami.world._visible import VisibleAgent


def reference_agent(spec: str, parser: Parser = IN_PROCESS) -> ReferenceAgent | TrivialAgent | VisibleAgent:
    """The factory of the ``reference`` model kind: ``reference:<agent>``; an agent that reads
    pictures reads them with ``parser`` (a run's: its ``--workers`` processes, and its cache)."""
    if spec in TRIVIAL:
        return TrivialAgent(spec, parser)
    if spec in VISIBLE:
        return VisibleAgent(parser)
    return ReferenceAgent(spec, parser)
