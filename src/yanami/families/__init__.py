"""The benchmark families, one folder each: YANAMI's own facts (`yanami`), and the families graded
by their own protocols, WEAVE (`weave`) and IMUG-Bench (`imug`), each with its facts (the
folder's ``FACTS``, registered by its entry point), its importer, its rules, its judge and
prompts, and its scores.

A family is registered by its `yanami.contract.FamilyFacts`, whose hooks name the modules
here (``yanami.families.weave.importer:import_weave``...); what the protocol families share
is `_import` (reading a source safely), `_judge` (`ProtocolJudge`), `_sources` (the
benchmark's own prompts, ``--protocol-source``) and `_scores` (`ProtocolScoring`,
`ProtocolScorer`). Nothing in yanami imports this package but through those hooks.
"""
