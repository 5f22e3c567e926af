"""`sonic-deploy probe serve`: offline stand-ins for every hop the probe and the clients call (server.py
lists them). They measure the probe, so they import nothing of it. Never imports aws_cdk."""
