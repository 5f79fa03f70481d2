"""kombu's filesystem transport with atomic message files (the embedded Celery broker).

kombu's ``filesystem`` transport writes each message straight into its final
``<time>_<uuid>.<queue>.msg`` file, while a consumer lists the folder, moves any
``.msg`` file away and reads it without the writer's lock. A consumer that finds
the file between its creation and the write reads an empty message and the
Celery worker dies (``JSONDecodeError``, kombu issue #1551); on a loaded machine
that happened to an agent within minutes. Here a message is written to a hidden
temporary name in the same folder and renamed into place (``os.replace``, atomic
on one filesystem), so a consumer only ever sees whole messages. Reading is
unchanged, so old and new writers can share one folder.
"""
from __future__ import annotations

import os
import uuid

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

__all__ = ["Channel", "Transport", "TRANSPORT"]

#: what Celery's ``broker_transport`` names to use this transport
TRANSPORT = "webapp.runtime.fs_transport:Transport"


class Channel(filesystem.Channel):
    """A filesystem channel whose ``_put`` is write-to-temporary-then-rename."""

    def _put(self, queue, payload, **kwargs):
        """Put ``payload`` on ``queue`` as one complete file (see module docstring)."""
        name = "{}_{}.{}.msg".format(int(round(filesystem.monotonic() * 1000)), uuid.uuid4(), queue)
        final = os.path.join(self.data_folder_out, name)
        temporary = os.path.join(self.data_folder_out, f".{name}.tmp")  # never matches "<queue>.msg"
        try:
            with open(temporary, "wb") as fh:
                fh.write(str_to_bytes(dumps(payload)))
            os.replace(temporary, final)
        except OSError as exc:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    """kombu's filesystem transport using :class:`Channel`."""

    Channel = Channel

    @property
    def default_connection_params(self) -> dict:
        """No default host: a folder has none. kombu's virtual transports default to ``localhost``, and a
        connection to a URL without one (``filesystem://``) then logged the WARNING "No hostname was
        supplied" on every start of a node and its agent."""
        return {"port": self.default_port}
