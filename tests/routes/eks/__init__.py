"""Tests of the EKS route."""
