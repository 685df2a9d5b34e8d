"""assign-add: reproduce and dissect 'Assign and Add' (variable binding + modular addition)."""

__version__ = "0.1.0"
