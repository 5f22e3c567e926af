"""Tests of the EKS route's constructs, each on a bare stack."""
