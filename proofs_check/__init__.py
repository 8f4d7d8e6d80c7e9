"""Ties each claim of the paper to its evidence: the claim registry, the checks and ``attneb verify``."""
