"""Trust: signed versions (keys.py, signing.py, verify.py) and lockfiles (lockfile.py)."""
