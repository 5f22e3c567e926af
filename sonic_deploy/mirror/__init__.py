"""`sonic-deploy mirror`: what to copy into your ECR for an EKS cluster without egress (no aws_cdk here)."""
