"""IMUG-Bench (``ccccEsion/IMUG-Bench``): its importer, its protocol (rules, grids, judge, prompts)
and its scores."""
