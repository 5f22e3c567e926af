"""The TTS hop's two pieces of logic: where a reply's sentences end, and when the caller hears the reply."""

from __future__ import annotations

import pytest

from sonic_deploy.audio import AudioFormat, tone
from sonic_deploy.client.errors import AudioChunk
from sonic_deploy.standins.llm import REPLY, reply_tokens
from sonic_deploy.turn.speakers import Listener, Reply, Sentences


def _cut(pieces: list[str]) -> list[tuple[int, str]]:
    """Each sentence with the index of the piece that let it out; then the rest."""
    sentences, out = Sentences(), []
    for index, piece in enumerate(pieces):
        out += [(index, sentence) for sentence in sentences.feed(piece)]
    if (rest := sentences.rest()) is not None:
        out.append((len(pieces), rest))
    return out


def test_a_sentence_goes_when_the_next_word_begins_and_the_text_joins_back() -> None:
    tokens = reply_tokens()
    cut = _cut(tokens)
    assert [sentence for _, sentence in cut] == [
        "Sure, your table for two is booked for eight tonight. ",
        "Is there anything else I can help you with?",
    ]
    assert cut[0][0] == tokens.index(" Is")  # "tonight." waits for the word after it
    assert "".join(sentence for _, sentence in cut) == REPLY


@pytest.mark.parametrize(
    ("pieces", "sentences"),
    [
        (["It is 8.", "30 now. ", "Bye"], ["It is 8.30 now. ", "Bye"]),
        (["Dr. Smith is in. ", "Yes"], ["Dr. Smith is in. ", "Yes"]),
        (["J. Smith called. Then", " left."], ["J. Smith called. ", "Then left."]),
        (["One. Two! Three? Fo", "ur"], ["One. ", "Two! ", "Three? ", "Four"]),
        (['He said "yes." Then', " went."], ['He said "yes." ', "Then went."]),
        (["Ends with a dot."], ["Ends with a dot."]),
        (["   "], []),
    ],
)
def test_where_sentences_end(pieces: list[str], sentences: list[str]) -> None:
    assert [sentence for _, sentence in _cut(pieces)] == sentences


def test_heard_is_when_playback_reaches_the_first_audible_sample() -> None:
    line = AudioFormat("pcm_s16le", 8000)
    reply = Reply()
    listener = Listener(line, reply, -40.0)
    silent, loud = tone(line, 100, True), tone(line, 20, False)
    listener.hear(AudioChunk(silent, 10.0))  # 100 ms of silence first, all at once
    listener.hear(AudioChunk(loud, 10.002))  # the audible chunk right behind it
    assert reply.first_byte_at == 10.0
    assert reply.heard_at == pytest.approx(10.0 + 0.1 + 1 / 8000)  # played out: not when it arrived
    assert reply.audio_s == pytest.approx(0.12)


def test_audio_that_comes_slower_than_it_plays_is_heard_when_it_arrives() -> None:
    line = AudioFormat("pcm_mulaw", 8000)
    reply = Reply()
    listener = Listener(line, reply, -40.0)
    listener.hear(AudioChunk(tone(line, 20, True), 5.0))
    listener.hear(AudioChunk(tone(line, 20, False), 5.5))  # an underrun: half a second late
    assert reply.heard_at == 5.5
