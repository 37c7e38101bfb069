"""The reliability and security suite (issue 8): bad input, isolation, faults, concurrency."""
