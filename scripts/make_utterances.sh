#!/usr/bin/env bash
# How the caller utterances shipped with `sonic-deploy probe turn` were made (sonic_deploy/turn/utterances/).
# Not run by the build: the WAV files are committed. Rerun it to change them (needs Debian's espeak-ng and sox).
#
# Each utterance is spoken by eSpeak NG (voice en-us, 165 words a minute), then given 250 ms of silence before
# and after: the turn probe keeps sending silence after the file ends, as a phone line does, until the final
# transcript comes, and finds the end of speech in the file itself (its last sample above the threshold).
# Two forms of each: telephony (8 kHz G.711 mu-law, as Twilio, Amazon Connect and SIP trunks send it) and
# wideband (16 kHz 16-bit PCM, as a WebRTC agent resamples it for speech to text).
set -euo pipefail
out="$(cd "$(dirname "$0")/.." && pwd)/sonic_deploy/turn/utterances"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
while IFS='|' read -r name text; do
  espeak-ng -v en-us -s 165 -w "$tmp/$name.wav" "$text"
  sox "$tmp/$name.wav" -r 16000 -b 16 -e signed-integer -c 1 "$out/$name-16k.wav" pad 0.25 0.25
  sox "$tmp/$name.wav" -r 8000 -e u-law -c 1 "$out/$name-8k-mulaw.wav" pad 0.25 0.25
done <<'LINES'
book|Hi, I'd like to book a table for two tonight.
time|Around eight o'clock, if you have anything.
thanks|Perfect, thank you. That's all I needed.
LINES
