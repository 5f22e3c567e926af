"""One call's turns: the stamps, in order, the hops that tile the turn, and every hop's failure named."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from sonic_deploy.turn.call import HOPS, STAMPS, CallPlan, Hops, run_call
from sonic_deploy.turn.caller_audio import CallerAudio, shipped

from .fakes import FakeLlm, FakeSpeaker, FakeStt


def _short(audio: CallerAudio) -> CallerAudio:
    """The utterance's last 0.4 s of speech and its silence: the same end of speech, a quicker test."""
    cut = int(max(0.0, audio.speech_end_s - 0.4) * audio.sample_rate) * audio.bytes_per_sample
    return CallerAudio(
        audio.name,
        audio.encoding,
        audio.sample_rate,
        audio.data[cut:],
        audio.speech_end_s - cut / audio.bytes_per_sample / audio.sample_rate,
    )


def _call(stt: FakeStt, llm: FakeLlm, tts: FakeSpeaker, **plan: Any) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    utterances = tuple(_short(item) for item in shipped("telephony"))
    settings: dict[str, Any] = {
        "turns": 3,
        "warmup_turns": 1,
        "gap_s": 0.0,
        "stt_timeout_s": 2.0,
        "reply_timeout_s": 2.0,
    }
    settings.update(plan)

    async def main() -> None:
        async with asyncio.timeout(30):  # whatever breaks, the call never hangs the suite
            await run_call(7, Hops(stt, llm, tts, "be brief"), CallPlan(utterances, **settings), lines.append)

    asyncio.run(main())
    return lines


def test_each_turn_has_its_stamps_in_order_and_its_hops_tile_it() -> None:
    lines = _call(FakeStt(final_s=0.05), FakeLlm(), FakeSpeaker())
    assert [(line["call"], line["turn"], line["warmup"]) for line in lines] == [
        (7, 0, True),
        (7, 1, False),
        (7, 2, False),
    ]
    for line in lines:
        assert "error" not in line, line
        at = line["at_ms"]
        assert list(at) == [name for name in STAMPS if name in at]
        assert set(at) == set(STAMPS)
        assert at["speech_end"] == 0.0
        ordered = [at[name] for name in STAMPS if name != "first_partial"]
        assert ordered == sorted(ordered), at
        assert at["speech_start"] <= at["first_partial"] <= at["final_transcript"]
        assert list(line["hops_ms"]) == list(HOPS)
        assert sum(line["hops_ms"].values()) == pytest.approx(line["turn_ms"], abs=0.01)
        assert line["turn_ms"] == at["first_audible"]
        # What the fakes guarantee: nothing comes before it is due.
        assert line["hops_ms"]["llm"] >= 30 and line["hops_ms"]["tts"] >= 20
        assert line["hops_ms"]["audible"] == pytest.approx(10, abs=0.01)
        assert line["hops_ms"]["stt"] >= 50


def test_the_conversation_so_far_goes_to_the_model() -> None:
    llm = FakeLlm()
    lines = _call(FakeStt(), llm, FakeSpeaker())
    assert [len(seen) for seen in llm.seen] == [1, 3, 5]
    assert [message.role for message in llm.seen[2]] == ["user", "assistant", "user", "assistant", "user"]
    assert llm.seen[2][1].content == "Sure, at eight. Anything else?"
    assert (
        lines[0]["transcript"] == "I'd like a table."
        and lines[0]["reply"] == "Sure, at eight. Anything else?"
    )


def test_a_model_error_is_named_and_counted_and_the_call_goes_on() -> None:
    lines = _call(FakeStt(), FakeLlm(fail_on_turns=(1,)), FakeSpeaker())
    assert [line.get("error", {}).get("hop") for line in lines] == [None, "llm", None]
    assert lines[1]["error"]["kind"] == "status_429"
    assert "final_transcript" in lines[1]["at_ms"] and "turn_ms" not in lines[1]


def test_a_tts_error_is_the_tts_hops() -> None:
    lines = _call(FakeStt(), FakeLlm(), FakeSpeaker(fail=True), turns=2)
    assert [line["error"]["hop"] for line in lines] == ["tts", "tts"]
    assert lines[0]["error"]["kind"] == "closed_1013"
    assert "tts_handed" in lines[0]["at_ms"] and "tts_first_byte" not in lines[0]["at_ms"]


def test_a_reply_with_nothing_audible_is_an_error_not_a_turn() -> None:
    lines = _call(FakeStt(), FakeLlm(), FakeSpeaker(silent=True), turns=2)
    assert {line["error"]["kind"] for line in lines} == {"silent"}


def test_no_final_transcript_is_a_timeout_and_ends_the_call() -> None:
    lines = _call(FakeStt(never_final=True), FakeLlm(), FakeSpeaker(), stt_timeout_s=0.3)
    assert lines[0]["error"]["hop"] == "stt" and lines[0]["error"]["kind"] == "timeout"
    assert not lines[0]["warmup"]  # a failure in the warm-up turn still counts: nothing worked
    assert [line.get("skipped") for line in lines[1:]] == ["the speech-to-text session had ended"] * 2


def test_a_broken_line_is_the_stt_hops_and_ends_the_call() -> None:
    lines = _call(FakeStt(fail_after=5), FakeLlm(), FakeSpeaker())
    assert lines[0]["error"] == {"hop": "stt", "kind": "cut", "message": "the fake line dropped"}
    assert [line["turn"] for line in lines if "skipped" in line] == [1, 2]


def test_a_line_that_breaks_during_a_reply_fails_the_next_turn_at_once() -> None:
    # 0.4 s of speech and 0.58 s of silence a turn at 20 ms: the line breaks in the first turn's reply.
    began = time.perf_counter()
    lines = _call(FakeStt(fail_after=60), FakeLlm(first_token_s=0.5), FakeSpeaker(), stt_timeout_s=30.0)
    assert "error" not in lines[0]
    assert lines[1]["error"]["kind"] == "cut" and "final_transcript" not in lines[1]["at_ms"]
    assert time.perf_counter() - began < 15  # at once: not after waiting out the 30 s timeout


def test_a_session_that_cannot_open_is_a_counted_failure() -> None:
    lines = _call(FakeStt(refuse=True), FakeLlm(), FakeSpeaker())
    assert lines[0] == {
        "call": 7,
        "turn": 0,
        "warmup": False,
        "utterance": "book-8k-mulaw",
        "error": {"hop": "stt", "kind": "refused", "message": "nothing listens there"},
    }
    assert [line["skipped"] for line in lines[1:]] == ["no speech-to-text session"] * 2


def test_a_model_that_stops_after_its_first_token_is_the_models_timeout() -> None:
    llm = FakeLlm(hang_after_first=True)
    lines = _call(FakeStt(), llm, FakeSpeaker(), turns=1, warmup_turns=0, reply_timeout_s=0.3)
    assert lines[0]["error"]["hop"] == "llm" and lines[0]["error"]["kind"] == "timeout"


def test_after_a_failed_reply_the_conversation_keeps_whole_exchanges() -> None:
    llm = FakeLlm(fail_on_turns=(0,))
    _call(FakeStt(), llm, FakeSpeaker())
    roles = [[message.role for message in seen] for seen in llm.seen]
    assert roles == [["user"], ["user"], ["user", "assistant", "user"]]


def test_an_empty_reply_is_the_models_error() -> None:
    lines = _call(FakeStt(), FakeLlm(reply=("",)), FakeSpeaker(), turns=1, warmup_turns=0)
    assert lines[0]["error"]["hop"] == "llm" and lines[0]["error"]["kind"] == "empty"


def test_a_reply_that_never_ends_is_a_timeout_of_the_model() -> None:
    lines = _call(FakeStt(), FakeLlm(hang=True), FakeSpeaker(), turns=1, warmup_turns=0, reply_timeout_s=0.3)
    assert lines[0]["error"]["hop"] == "llm" and lines[0]["error"]["kind"] == "timeout"
