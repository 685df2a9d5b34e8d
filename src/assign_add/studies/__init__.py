"""Studies over many runs that are not sweeps of a config field: time to binding over seeds (survival),
branch-and-replay of a run's fate, two studies compared, training until bound, the early predictor of
binding and the LLC study.  Each reads and writes ordinary run folders."""
