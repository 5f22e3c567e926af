"""Acknowledged findings of the rule packs run over the templates (cdk-nag's AwsSolutions in the tests).
Each acknowledgement sits next to the resource it concerns and says why the finding does not apply."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct


def acknowledge(scope: IConstruct, *rules: str, reason: str) -> None:
    """`rules` as the finding prints them after 'AwsSolutions::', e.g. 'AwsSolutions-IAM5[Resource::*]'."""
    Validations.of(scope).acknowledge(
        *(Acknowledgment(id=f"AwsSolutions::{rule}", reason=reason) for rule in rules)
    )
