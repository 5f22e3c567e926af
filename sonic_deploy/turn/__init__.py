"""`sonic-deploy probe turn`: simulated calls, timed from the end of the caller's speech to the first audio heard."""
