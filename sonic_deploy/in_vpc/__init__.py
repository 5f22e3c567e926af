"""`sonic-deploy probe ... --in-vpc ENV`: the probe run from Fargate tasks inside the stack's VPC, coordinated
through the stack's probe bucket (protocol.py), set up from the command line (arguments.py, session.py),
started and stopped from the operator's machine (fleet.py, runner.py), and run inside each task (task.py)."""
