"""How the test servers here say where they listen (the --port-file of
tests/testing/process.h's PortFileServer). Stdlib only."""
import os


def write_port(server, path):
    """Writes the port `server` listens on to `path`, whole or not at all: the
    reader polls for the file and never sees a partial number."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, path)
