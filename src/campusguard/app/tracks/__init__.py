"""The cameras' tracks, kept for replay: `files` (the compact per camera-hour format), `recorder`
(`TrackRecorder` per camera, `TrackWriter` thread), `segments` (reading a period back) and
`replay` (`campusguard replay`: changed rules over the stored tracks, matched against the stored
incidents and their outcomes). See docs/replay.md."""
