"""The test suite. Imported before any test module, so before the jsii kernel starts (it reads the
environment once)."""

import os

# CDK's built-in template validation costs each synth 1-3 CPU-s (the engine, then each template); the unit
# tier skips it. test_app.py's real `cdk synth` and `make compliance` (every variant) still run it.
os.environ["CDK_VALIDATION"] = "false"
