"""The constructs only the EKS route uses."""
