"""One check's outcome: pass, fail or skipped, what was found, and what to do about a failure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from botocore.exceptions import ClientError

Status = Literal["pass", "fail", "skipped"]


@dataclass(frozen=True)
class CheckResult:
    check: str
    status: Status
    detail: str
    fix: str = ""


def passed(check: str, detail: str) -> CheckResult:
    return CheckResult(check, "pass", detail)


def failed(check: str, detail: str, fix: str) -> CheckResult:
    return CheckResult(check, "fail", detail, fix)


def skipped(check: str, detail: str) -> CheckResult:
    return CheckResult(check, "skipped", detail)


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def error_message(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Message", error))


def aws_error(check: str, error: ClientError, action: str) -> CheckResult:
    """A failure for an AWS error no check recognised: say what AWS said, and the likely fix."""
    code = error_code(error)
    if code in {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"}:
        return failed(
            check,
            f"not allowed to call {action}: {error_message(error)}",
            f"grant the credentials {action} (read-only), or run preflight with a role that has it",
        )
    return failed(
        check,
        f"{action} failed: {code}: {error_message(error)}",
        "retry; if it persists, check the Region and the AWS Health Dashboard",
    )
