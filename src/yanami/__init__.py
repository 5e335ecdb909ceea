"""yanami: build, verify, evaluate and report stateful multi-turn multimodal dialogue."""

__version__ = "0.2.0"
