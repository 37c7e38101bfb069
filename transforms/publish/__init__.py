"""Stage 7, publish: the run's tables in; one atomic snapshot in the warehouse (`snapshot`),
the run log and the markdown run report (`run_report`) out."""
