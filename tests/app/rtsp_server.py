"""A real RTSP camera on loopback for the fault tests: GStreamer's RTSP server (Debian's
``gir1.2-gst-rtsp-server-1.0``) run by the system Python (``/usr/bin/python3``, which has ``gi``).

``/usr/bin/python3 rtsp_server.py PORT`` serves ``rtsp://127.0.0.1:PORT/cam``: a live 320x180
Motion-JPEG stream at 10 fps of a red ball (what the tests' `BlobDetector` calls a person) moving over
a dark background, and prints ``ready`` once it listens. It runs until killed.

Kept free of the project's imports: it runs outside the project's virtual environment.
"""

from __future__ import annotations

import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402

PIPELINE = (
    "( videotestsrc is-live=true pattern=ball foreground-color=0xffe60000 background-color=0xff1e1e1e "
    "! video/x-raw,width=320,height=180,framerate=10/1 ! videoconvert ! video/x-raw,format=I420 "
    "! jpegenc quality=90 ! rtpjpegpay name=pay0 pt=26 )"
)


def main(port: int) -> None:
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(port))
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(PIPELINE)
    factory.set_shared(True)
    server.get_mount_points().add_factory("/cam", factory)
    if server.attach(None) == 0:
        print(f"cannot listen on 127.0.0.1:{port}", flush=True)
        raise SystemExit(1)
    print("ready", flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    main(int(sys.argv[1]))
