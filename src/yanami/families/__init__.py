"""The benchmark families graded by their own protocols, one folder each: WEAVE (`weave`) and
IMUG-Bench (`imug`), each with its importer, its rules, its judge and prompts, and its scores.

A family is registered by its `yanami.families.FamilyFacts`, whose hooks name the modules
here (``yanami.families.weave.importer:import_weave``...); what the protocol families share
is `_import` (reading a source safely), `_judge` (`ProtocolJudge`), `_sources` (the
benchmark's own prompts, ``--protocol-source``) and `_scores` (`ProtocolScoring`,
`ProtocolScorer`). Nothing in yanami imports this package but through those hooks.
"""
