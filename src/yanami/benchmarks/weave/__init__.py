"""WEAVE (``weichow23/weave``): its importer, its protocol (rules, judge, prompts) and its scores."""
