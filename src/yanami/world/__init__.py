"""The embedded procedural world: scenes, a renderer, a pixel parser and dialogue builders."""
