"""Model providers for threads (runner/thread.py): wire formats as small adapters."""
